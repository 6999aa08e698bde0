"""The restart-package builder's form and its flat rows (verifications, discrepancies) as
formsets; the page adds and removes rows without a management form, so `row_formset`
numbers the rows sent and writes it."""

from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError

from specs.formats.restart import INDICATORS, Discrepancy, Indicator
from specs.inputs import VerificationInput
from specs.validators import MAX_OUTPUT_BYTES, validate_commit, validate_output_size

COMMIT_HELP = "A git commit hash: 7 to 64 hexadecimal digits."


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
