"""Page forms: spec settings, Markdown import, review decisions, the version editor, the builder.

The version editor holds items with nested alternatives whose count changes in the browser,
so it reads indexed field names (`items-3-key`, `items-3-alt-1-text`): formsets do not nest.
Validation is the same pure `check_items` the API uses. The restart-package builder's forms
are in `specs.package_forms`, re-exported here.
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
from specs.models import Consequence, ItemKind, ItemStatus


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


# The restart-package builder lives in its own module; re-exported for the views.
from specs.package_forms import (  # noqa: E402, F401
    COMMIT_HELP,
    DiscrepancyFormSet,
    DiscrepancyRowForm,
    PackageForm,
    VerificationFormSet,
    VerificationRowForm,
    row_formset,
)
