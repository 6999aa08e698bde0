"""Page forms: spec settings, Markdown import, review decisions, the version editor, the builder.

The version editor holds items with nested alternatives whose count changes in the browser,
so it reads indexed field names (`items-3-key`, `items-3-alt-1-text`): formsets do not nest.
Validation is the same pure `check_items` the API uses. The restart-package builder's flat
rows (verifications, discrepancies) are formsets of `VerificationRowForm` and
`DiscrepancyRowForm`; the page adds and removes rows without a management form, so
`row_formset` numbers the rows sent and writes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django import forms
from django.core.exceptions import ValidationError

from specs.analysis.content import (
    KEY_HELP,
    Alternative,
    Item,
    check_items,
    normalize_item,
    normalize_text,
    suggest_key,
)
from specs.formats.markdown import Source, parse_source
from specs.formats.restart import INDICATORS, Discrepancy, Indicator
from specs.inputs import VerificationInput
from specs.models import Consequence, ItemKind, ItemStatus
from specs.validators import MAX_OUTPUT_BYTES, validate_commit, validate_output_size

COMMIT_HELP = "A git commit hash: 7 to 64 hexadecimal digits."


class SpecForm(forms.Form):
    title = forms.CharField(max_length=200)
    slug = forms.SlugField(
        max_length=80,
        required=False,
        help_text="Used in links; leave empty to derive it from the title. It cannot change later.",
    )
    consequence = forms.ChoiceField(
        choices=Consequence.choices,
        initial=Consequence.HIGH,
        widget=forms.RadioSelect,
        help_text="High: every version needs approval from a reviewer who is not its author. "
        "Low: a version becomes authoritative when an editor submits it.",
    )
    summary = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What this specification governs, in a sentence or two.",
    )
    owner = forms.ChoiceField(required=False, help_text="Who orders changes to this specification.")
    project = forms.CharField(
        required=False,
        max_length=1000,
        help_text="The working directory it governs, e.g. /home/me/repo. Each compaction of a "
        "session there (or below) is checked for what it kept of the settled items.",
    )

    def __init__(self, *args, members=(), editing=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["owner"].choices = [("", "Me")] + [
            (m.user.username, m.user.username) for m in members
        ]
        if editing:
            del self.fields["slug"]


class ImportForm(forms.Form):
    markdown = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 18, "class": "mono", "spellcheck": "false"}),
        help_text="Paste a spec in the documented structure, or choose a file below.",
    )
    file = forms.FileField(required=False, label="…or a Markdown file")
    note = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="What this version changes and why.",
    )

    def clean(self):
        data = super().clean()
        upload = data.get("file")
        if upload is not None:
            raw = upload.read(2_000_001)
            if len(raw) > 2_000_000:
                raise ValidationError({"file": "The file is larger than 2 MB."})
            try:
                data["markdown"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValidationError({"file": "The file is not UTF-8 text."}) from None
        if not (data.get("markdown") or "").strip():
            raise ValidationError({"markdown": "Paste the Markdown or choose a file."})
        return data


class RejectForm(forms.Form):
    comment = forms.CharField(
        label="Rejection comment",
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "A rejection needs a comment: say what must change."},
        help_text="Required. The author sees it with the rejected version.",
    )


# --- version editor -------------------------------------------------------------

_ITEM_FIELD = re.compile(r"items-(\d+)-key")
_ALT_FIELD = re.compile(r"items-(\d+)-alt-(\d+)-text")


@dataclass
class EditorAlternative:
    index: int
    text: str = ""
    evidence: str = ""
    errors: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class EditorItem:
    index: int
    key: str = ""
    kind: str = ItemKind.REQUIREMENT
    text: str = ""
    rationale: str = ""
    status: str = ItemStatus.SETTLED
    alternatives: list[EditorAlternative] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    suggested_key: bool = False

    @property
    def next_alternative(self) -> int:
        return max((a.index for a in self.alternatives), default=-1) + 1

    def to_item(self) -> Item:
        return normalize_item(
            Item(
                key=self.key,
                kind=self.kind,
                text=self.text,
                rationale=self.rationale,
                status=self.status,
                alternatives=tuple(Alternative(a.text, a.evidence) for a in self.alternatives),
            )
        )


class VersionEditor:
    """Reads, validates and re-renders the rows of the version editor."""

    kinds = ItemKind.choices
    statuses = ItemStatus.choices
    key_help = KEY_HELP

    def __init__(
        self, *, items: list[EditorItem], note: str = "", sources_text: str = "", errors=None
    ):
        self.items = items
        self.note = note
        self.sources_text = sources_text
        self.errors: dict[str, list[str]] = errors or {}
        self.notices: list[str] = []
        self.sources: list[Source] = []

    @property
    def next_index(self) -> int:
        return max((item.index for item in self.items), default=-1) + 1

    @classmethod
    def from_items(cls, items: list[Item], *, note: str = "", sources: list[Source] = ()):
        rows = [
            EditorItem(
                index=position,
                key=item.key,
                kind=item.kind,
                text=item.text,
                rationale=item.rationale,
                status=item.status,
                alternatives=[
                    EditorAlternative(index=i, text=a.text, evidence=a.evidence)
                    for i, a in enumerate(item.alternatives)
                ],
            )
            for position, item in enumerate(items)
        ]
        sources_text = "\n".join(f"{s.token} — {s.label}" if s.label else s.token for s in sources)
        return cls(items=rows or [EditorItem(index=0)], note=note, sources_text=sources_text)

    @classmethod
    def from_post(cls, data) -> VersionEditor:
        indices = sorted({int(m.group(1)) for name in data if (m := _ITEM_FIELD.fullmatch(name))})
        rows = []
        for index in indices:
            prefix = f"items-{index}-"
            alt_indices = sorted(
                {
                    int(m.group(2))
                    for name in data
                    if (m := _ALT_FIELD.fullmatch(name)) and int(m.group(1)) == index
                }
            )
            rows.append(
                EditorItem(
                    index=index,
                    key=data.get(prefix + "key", "").strip(),
                    kind=data.get(prefix + "kind", ""),
                    text=data.get(prefix + "text", ""),
                    rationale=data.get(prefix + "rationale", ""),
                    status=data.get(prefix + "status", ItemStatus.SETTLED),
                    alternatives=[
                        EditorAlternative(
                            index=alt,
                            text=data.get(f"{prefix}alt-{alt}-text", ""),
                            evidence=data.get(f"{prefix}alt-{alt}-evidence", ""),
                        )
                        for alt in alt_indices
                    ],
                )
            )
        return cls(items=rows, note=data.get("note", ""), sources_text=data.get("sources", ""))

    def apply_row_actions(self, data) -> bool:
        """The no-JavaScript buttons: add or remove an item or an alternative. True if any."""
        if "add_item" in data:
            self.items.append(EditorItem(index=self.next_index))
            return True
        if "remove_item" in data:
            self.items = [i for i in self.items if str(i.index) != data["remove_item"]]
            return True
        if "add_alternative" in data:
            for item in self.items:
                if str(item.index) == data["add_alternative"]:
                    item.alternatives.append(EditorAlternative(index=item.next_alternative))
            return True
        if "remove_alternative" in data:
            item_index, _, alt_index = data["remove_alternative"].partition("-")
            for item in self.items:
                if str(item.index) == item_index:
                    item.alternatives = [a for a in item.alternatives if str(a.index) != alt_index]
            return True
        return False

    def is_valid(self) -> bool:
        """Drop untouched blank rows, suggest missing keys, then check every item."""
        self.items = [row for row in self.items if not _blank(row)]
        for row in self.items:
            row.alternatives = [a for a in row.alternatives if a.text.strip() or a.evidence.strip()]
        self._suggest_keys()
        self._check_items()
        if len(normalize_text(self.note)) > 10_000:
            self.errors.setdefault("note", []).append("At most 10,000 characters.")
        self._read_sources()
        return not self.errors and not any(
            row.errors or any(a.errors for a in row.alternatives) for row in self.items
        )

    def _suggest_keys(self) -> None:
        taken = [row.key for row in self.items if row.key]
        for row in self.items:
            if not row.key and normalize_text(row.text):
                row.key = suggest_key(row.text, taken)
                row.suggested_key = True
                taken.append(row.key)
        suggested = [row.key for row in self.items if row.suggested_key]
        if suggested:
            self.notices.append(f"Keys suggested from text: {', '.join(suggested)}.")

    def _check_items(self) -> None:
        """The pure item checks, each problem put on its row or alternative."""
        for problem in check_items(self.cleaned_items()).problems:
            if problem.index is None:
                self.errors.setdefault("items", []).append(problem.message)
                continue
            row = self.items[problem.index]
            target = row if problem.alternative is None else row.alternatives[problem.alternative]
            target.errors.setdefault(problem.field, []).append(problem.message)

    def _read_sources(self) -> None:
        self.sources = []
        for number, line in enumerate(self.sources_text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                self.sources.append(parse_source(line))
            except ValueError as exc:
                self.errors.setdefault("sources", []).append(f"Line {number}: {exc}")

    @property
    def form_messages(self) -> list[str]:
        """Errors about the version as a whole, shown above the form (others sit by their field)."""
        return list(self.errors.get("items", []))

    @property
    def error_count(self) -> int:
        return sum(len(v) for v in self.errors.values()) + sum(
            len(row.errors) + sum(len(a.errors) for a in row.alternatives) for row in self.items
        )

    def cleaned_items(self) -> list[Item]:
        return [row.to_item() for row in self.items]

    def add_errors(self, errors: dict) -> None:
        """Errors a service raised (already phrased for people) shown above the form."""
        for name, messages in errors.items():
            self.errors.setdefault(name if name in {"note", "sources"} else "items", []).extend(
                messages
            )


def _blank(row: EditorItem) -> bool:
    return not (row.key or row.text.strip() or row.rationale.strip()) and not any(
        a.text.strip() or a.evidence.strip() for a in row.alternatives
    )


# --- restart-package builder ----------------------------------------------------


def _lines(value: str) -> list[str]:
    return [line.strip() for line in (value or "").splitlines() if line.strip()]


class PackageForm(forms.Form):
    title = forms.CharField(
        max_length=200, required=False, help_text="Leave empty for 'Restart from <spec> vN'."
    )
    spec_version = forms.ChoiceField(
        label="Specification",
        help_text="The authoritative version the package pins. Only authoritative versions can "
        "be pinned.",
    )
    trace_session = forms.CharField(
        required=False,
        max_length=500,
        label="Trace session",
        help_text="The session this package restarts (optional): the start of its id, or words "
        "from its title or project.",
        widget=forms.TextInput(attrs={"list": "trace-session-options", "autocomplete": "off"}),
    )
    remote = forms.CharField(
        max_length=500,
        required=False,
        label="Repository remote",
        help_text="e.g. git@host:team/repo.git",
    )
    branch = forms.CharField(max_length=300, required=False)
    commit = forms.CharField(max_length=64, help_text=COMMIT_HELP, validators=[validate_commit])
    completed_changes = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One change per line.",
    )
    changed_files = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        help_text="One path per line, as the repository shows them (git diff --name-only).",
    )
    current_failures = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One failure per line, e.g. a failing test id and its message.",
    )
    authoritative_sources = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line: what the restarted run must treat as authoritative.",
    )
    next_action = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The one thing the restarted run does first.",
        error_messages={"required": "State the next action."},
    )
    indicators = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        choices=[(slug, label) for slug, (label, _) in INDICATORS.items()],
        label="Restart indicators observed",
    )
    other_indicator = forms.CharField(
        required=False,
        max_length=2000,
        label="Other indicator",
        help_text="Required when 'Other' is ticked: what did you observe?",
    )

    def __init__(self, *args, versions=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["spec_version"].choices = [("", "Choose an authoritative version…")] + [
            (str(v.pk), f"{v.spec.title} · v{v.number} · sha256:{v.fingerprint[:12]}")
            for v in versions
        ]
        self.verification_rows: list[dict] = []
        self.discrepancy_rows: list[dict] = []
        self.rows_ok = self.read_rows(self.data, self.files) if self.is_bound else True

    def is_valid(self) -> bool:
        """The fields and every repeated row."""
        return super().is_valid() and self.rows_ok

    def clean_commit(self):
        return self.cleaned_data["commit"].lower()

    def clean(self):
        data = super().clean()
        if (
            "other" in data.get("indicators", [])
            and not (data.get("other_indicator") or "").strip()
        ):
            self.add_error("other_indicator", "Describe what you observed for 'Other'.")
        data["indicator_list"] = [
            Indicator(slug, data.get("other_indicator", "") if slug == "other" else "")
            for slug in data.get("indicators", [])
        ]
        for name in (
            "completed_changes",
            "changed_files",
            "current_failures",
            "authoritative_sources",
        ):
            data[name] = _lines(data.get(name, ""))
        return data

    # The repeated rows are Django formsets, numbered as the page numbers them.
    def read_rows(self, data, files) -> bool:
        """Fill the verification and discrepancy rows; True when every row is valid.

        A row left entirely empty is dropped."""
        verifications = row_formset(VerificationFormSet, data, files, "verifications", "command")
        discrepancies = row_formset(DiscrepancyFormSet, data, files, "discrepancies", "claim")
        verifications.is_valid()
        discrepancies.is_valid()
        self.verification_rows = [form.row() for form in verifications if form.has_changed()]
        self.discrepancy_rows = [form.row() for form in discrepancies if form.has_changed()]
        return not any(row["errors"] for row in self.verification_rows + self.discrepancy_rows)

    def verifications(self) -> list[VerificationInput]:
        return [
            VerificationInput(
                command=row["command"],
                exit_status=row["exit_status_value"],
                commit=row["commit"],
                output=row["output"],
            )
            for row in self.verification_rows
        ]

    def discrepancies(self) -> list[Discrepancy]:
        return [
            Discrepancy(
                claim=row["claim"], repository_state=row["repository_state"], source=row["source"]
            )
            for row in self.discrepancy_rows
        ]


class VerificationRowForm(forms.Form):
    """One verification of the builder: the command, its exit status, the commit it ran
    against and its raw output, typed or uploaded (UTF-8, up to MAX_OUTPUT_BYTES)."""

    command = forms.CharField(required=False)
    exit_status = forms.CharField(required=False)  # shown again as typed when it is not a number
    commit = forms.CharField(required=False)  # checked even when empty: see clean_commit
    output = forms.CharField(required=False, strip=False, validators=[validate_output_size])
    output_file = forms.FileField(required=False, allow_empty_file=True)

    def _upload_text(self) -> tuple[bytes | None, str | None]:
        """The uploaded output's bytes (read up to one past the limit) and its text, if UTF-8."""
        upload = self.files.get(self.add_prefix("output_file"))
        if upload is None:
            return None, None
        upload.seek(0)
        raw = upload.read(MAX_OUTPUT_BYTES + 1)
        try:
            return raw, raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw, None

    def output_text(self) -> str:
        """The uploaded text when there is a UTF-8 upload, else the typed output."""
        _raw, text = self._upload_text()
        return text if text is not None else (self["output"].value() or "")

    def has_changed(self) -> bool:
        """A row counts once it has a command, an exit status or output: the commit alone is
        filled in by the page."""
        return bool(
            (self["command"].value() or "").strip()
            or (self["exit_status"].value() or "").strip()
            or self.output_text().strip()
        )

    def clean_command(self) -> str:
        if not self.cleaned_data["command"]:
            raise ValidationError("Give the command that ran.")
        return self.cleaned_data["command"]

    def clean_exit_status(self) -> int:
        try:
            return int(self.cleaned_data["exit_status"])
        except ValueError:
            raise ValidationError("Give the exit status as a whole number, e.g. 0 or 1.") from None

    def clean_commit(self) -> str:
        commit = self.cleaned_data["commit"]
        if errors := _field_errors("commit", validate_commit, commit):
            raise ValidationError(
                " ".join([*errors["commit"], "The commit the command ran against."])
            )
        return commit

    def clean(self):
        data = super().clean()
        raw, text = self._upload_text()
        if raw is not None:  # the upload replaces the typed output
            errors = _field_errors("output", validate_output_size, raw).get("output")
            if errors is None and text is None:
                errors = ["The file is not UTF-8 text."]
            if errors is None:
                errors = _field_errors("output", validate_output_size, text).get("output")
            self._errors.pop("output", None)
            if errors:
                self._errors["output"] = self.error_class(errors)
        return data

    def row(self) -> dict:
        """The row as the page shows it again: what was typed (or uploaded), and the errors."""
        data = self.cleaned_data if self.is_bound else {}
        return {
            "index": int(self.prefix.rsplit("-", 1)[1]),
            "command": (self["command"].value() or "").strip(),
            "exit_status": (self["exit_status"].value() or "").strip(),
            "commit": (self["commit"].value() or "").strip(),
            "output": self.output_text(),
            "exit_status_value": data.get("exit_status"),
            "errors": {name: list(errors) for name, errors in self.errors.items()},
        }


class DiscrepancyRowForm(forms.Form):
    """One discrepancy: what an earlier summary claimed, by whom, and what the repository
    shows (which wins)."""

    claim = forms.CharField(required=False, strip=False)
    source = forms.CharField(required=False, strip=False)
    repository_state = forms.CharField(required=False, strip=False)

    def has_changed(self) -> bool:
        return any((self[name].value() or "").strip() for name in self.fields)

    def clean(self):
        data = super().clean()
        if not data.get("claim", "").strip():
            self.add_error("claim", "What did the earlier summary claim?")
        if not data.get("repository_state", "").strip():
            self.add_error("repository_state", "What does the repository show? It wins.")
        return data

    def row(self) -> dict:
        return {
            "index": int(self.prefix.rsplit("-", 1)[1]),
            **{name: self[name].value() or "" for name in self.fields},
            "errors": {name: list(errors) for name, errors in self.errors.items()},
        }


VerificationFormSet = forms.formset_factory(VerificationRowForm, extra=0)
DiscrepancyFormSet = forms.formset_factory(DiscrepancyRowForm, extra=0)


def row_formset(formset_class, data, files, prefix: str, key_field: str):
    """A formset of the rows the page sent. The page adds and removes rows without a
    management form, so the rows present (found by `key_field`) are numbered 0, 1, … here
    and the management form is written for them."""
    indices = _indices(data, prefix, key_field)
    names = list(formset_class.form.base_fields)
    bound, bound_files = {}, {}
    for new, old in enumerate(indices):
        for name in names:
            source = f"{prefix}-{old}-{name}"
            if source in data:
                bound[f"{prefix}-{new}-{name}"] = data.get(source)
            if files is not None and source in files:
                bound_files[f"{prefix}-{new}-{name}"] = files.get(source)
    bound[f"{prefix}-TOTAL_FORMS"] = str(len(indices))
    bound[f"{prefix}-INITIAL_FORMS"] = "0"
    return formset_class(bound, bound_files, prefix=prefix)


def _field_errors(name: str, validator, value) -> dict[str, list[str]]:
    """A model-field validator run on one value: {name: messages} or {}."""
    try:
        validator(value)
    except ValidationError as exc:
        return {name: exc.messages}
    return {}


def _indices(data, group: str, field_name: str) -> list[int]:
    pattern = re.compile(rf"{group}-(\d+)-{field_name}")
    return sorted({int(m.group(1)) for name in data if (m := pattern.fullmatch(name))})
