"""Forms for the context-file pages. Services still validate; their errors land on the field named."""

from __future__ import annotations

import json

from django import forms

from governance.services import InputError
from qualification.contextfiles.models import (
    CategoryChoices,
    DecisionRecord,
    Instruction,
    RepositoryListing,
)
from qualification.contextfiles.services import COST_MEASURES


def apply_input_error(form: forms.Form, exc: InputError) -> None:
    """Put a service's "field: message" error on that field, or on the form."""
    message = str(exc)
    name, _, rest = message.partition(": ")
    if rest and name in form.fields:
        form.add_error(name, rest)
    else:
        form.add_error(None, message)


class ImportForm(forms.Form):
    repository = forms.CharField(max_length=300, help_text="e.g. acme/shop")
    path = forms.CharField(max_length=300, initial="AGENTS.md")
    revision = forms.CharField(
        max_length=100, required=False,
        help_text="The commit or tag. Leave empty to use the content hash.",
    )  # fmt: skip
    upload = forms.FileField(required=False, label="File", help_text="Upload the file …")
    text = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
        label="… or paste its text", strip=False,
    )  # fmt: skip

    def clean(self):
        data = super().clean()
        upload, text = data.get("upload"), data.get("text")
        if upload:
            raw = upload.read(512 * 1024 + 1)
            try:
                data["text"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("upload", "This file is not UTF-8 text.")
        elif not (text and text.strip()):
            self.add_error("text", "Upload the file or paste its text.")
        return data


class LedgerForm(forms.ModelForm):
    class Meta:
        model = Instruction
        fields = [
            "category", "owner", "reason", "affects", "review_trigger", "deletion_condition",
            "last_reviewed_on", "review_due_on",
        ]  # fmt: skip
        labels = {"affects": "Failure or outcome it affects"}
        widgets = {
            "reason": forms.Textarea(attrs={"rows": 2}),
            "affects": forms.Textarea(attrs={"rows": 2}),
            "review_trigger": forms.Textarea(attrs={"rows": 2}),
            "deletion_condition": forms.Textarea(attrs={"rows": 2}),
            "last_reviewed_on": forms.DateInput(attrs={"type": "date"}),
            "review_due_on": forms.DateInput(attrs={"type": "date"}),
        }

    def clean(self):
        data = super().clean()
        last, due = data.get("last_reviewed_on"), data.get("review_due_on")
        if last and due and due < last:
            self.add_error("review_due_on", "The next review cannot be before the last one.")
        return data


class FileSettingsForm(forms.Form):
    review_interval_days = forms.IntegerField(min_value=1, max_value=3650)


class LedgerFilterForm(forms.Form):
    category = forms.ChoiceField(
        choices=[("", "All categories"), *CategoryChoices.choices], required=False
    )
    flagged = forms.BooleanField(required=False, label="Flagged only")


class ListingForm(forms.Form):
    repository = forms.CharField(max_length=300)
    label = forms.CharField(max_length=200, required=False, help_text="The commit it lists.")
    file = forms.FileField(
        help_text="`git ls-files`, `git ls-tree -r HEAD` or `sha256sum` output, or a tarball "
        "(.tar, .tar.gz, .tar.bz2, .tar.xz). Only names are read."
    )


class DriftCheckForm(forms.Form):
    listing = forms.ModelChoiceField(
        queryset=RepositoryListing.objects.none(), required=False,
        empty_label="No listing (skip path checks)",
    )  # fmt: skip

    def __init__(self, *args, listings=None, **kwargs):
        super().__init__(*args, **kwargs)
        if listings is not None:
            self.fields["listing"].queryset = listings


class VerificationForm(forms.Form):
    command = forms.CharField(max_length=500, widget=forms.HiddenInput)
    passed = forms.TypedChoiceField(
        choices=[("1", "Passed"), ("0", "Failed")], coerce=lambda v: v == "1", label="Result"
    )
    exit_code = forms.IntegerField(required=False)
    repository_revision = forms.CharField(max_length=100, required=False, label="At commit")
    output = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def clean(self):
        data = super().clean()
        code, passed = data.get("exit_code"), data.get("passed")
        if code is not None and passed is not None and passed != (code == 0):
            self.add_error("exit_code", "A command passes exactly when it exits with 0.")
        return data


class RegistrationForm(forms.Form):
    name = forms.CharField(max_length=200)
    revision = forms.ModelChoiceField(queryset=None, empty_label=None, label="File revision")
    primary_metric = forms.CharField(max_length=200, initial="task success")
    cost_measures = forms.MultipleChoiceField(
        choices=[(m, m.replace("_", " ")) for m in COST_MEASURES],
        initial=list(COST_MEASURES), widget=forms.CheckboxSelectMultiple, required=False,
    )  # fmt: skip
    model_name = forms.CharField(max_length=200)
    model_version = forms.CharField(max_length=200)
    harness_version = forms.CharField(max_length=200)
    decoding = forms.CharField(
        initial='{"temperature": 0}',
        help_text="JSON, e.g. {\"temperature\": 0, \"top_p\": 1}",
    )  # fmt: skip
    task_set_version = forms.CharField(max_length=200)
    expected_tasks = forms.IntegerField(
        required=False, min_value=1,
        help_text="With fewer than 80 tasks, Δ defaults to 15 points instead of 10.",
    )  # fmt: skip
    delta_pp = forms.FloatField(
        label="Decision threshold δ (points)", initial=5, min_value=0, max_value=99,
        help_text="“Helps” needs the 95% interval's lower bound above δ.",
    )  # fmt: skip
    margin_pp = forms.FloatField(
        label="Equivalence bound Δ (points)", required=False, min_value=0.5, max_value=50,
        help_text="“Equivalent” needs the 90% interval inside ±Δ. Empty: 10, or 15 under 80 tasks.",
    )  # fmt: skip
    target_power = forms.FloatField(initial=0.8, min_value=0.5, max_value=0.99)
    pilot_discordance = forms.FloatField(
        required=False, min_value=0.001, max_value=1, label="Pilot discordance ψ",
        help_text="Share of pairs whose outcomes differ, from a pilot; used for the power statement.",
    )  # fmt: skip
    ablations = forms.MultipleChoiceField(
        choices=[c for c in CategoryChoices.choices if c[0] != "other"],
        required=False, widget=forms.CheckboxSelectMultiple,
        help_text="One extra arm per category, keeping only that category's instructions.",
    )  # fmt: skip
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    reason = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}),
        label="Why the registration changes",
    )  # fmt: skip

    def __init__(self, *args, revisions=None, changing=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["revision"].queryset = revisions
        self.fields["revision"].label_from_instance = lambda r: (
            f"r{r.number} · {r.revision} · ≈{r.token_estimate:,} tokens"
        )
        if not changing:
            del self.fields["reason"]

    def clean_decoding(self):
        raw = self.cleaned_data.get("decoding") or ""
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not JSON: {exc.msg} (column {exc.colno}).") from None
        if not isinstance(value, dict) or not value:
            raise forms.ValidationError('Give the sampling settings, e.g. {"temperature": 0}.')
        return value

    def registration(self) -> dict:
        data = dict(self.cleaned_data)
        data["delta"] = data.pop("delta_pp") / 100
        margin = data.pop("margin_pp")
        data["margin"] = None if margin is None else margin / 100
        data["ablations"] = [
            {"name": f"only-{c.replace('_', '-')}", "categories": [c]}
            for c in data.pop("ablations")
        ]
        data.pop("reason", None)
        return data


class TrialUploadForm(forms.Form):
    file = forms.FileField(required=False, help_text="CSV or a JSON list")
    text = forms.CharField(
        required=False, strip=False, label="… or paste CSV",
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}),
    )  # fmt: skip

    def clean(self):
        data = super().clean()
        if not data.get("file") and not (data.get("text") or "").strip():
            self.add_error("file", "Choose a file or paste the trials.")
        return data


class DecisionForm(forms.Form):
    action = forms.ChoiceField(choices=DecisionRecord.Action.choices)
    kept = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    removed = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    rationale = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))


class CalculatorForm(forms.Form):
    both = forms.IntegerField(min_value=0, label="a · both pass")
    with_only = forms.IntegerField(min_value=0, label="b · only with the file")
    without_only = forms.IntegerField(min_value=0, label="c · only without the file")
    neither = forms.IntegerField(min_value=0, label="d · both fail")
    delta_pp = forms.FloatField(label="δ (points)", initial=5, min_value=-99, max_value=99)
    margin_pp = forms.FloatField(label="Δ (points)", initial=10, min_value=0.5, max_value=50)

    def clean(self):
        data = super().clean()
        cells = [data.get(k) for k in ("both", "with_only", "without_only", "neither")]
        if all(c is not None for c in cells) and sum(cells) == 0:
            raise forms.ValidationError("The table is empty: enter at least one pair.")
        return data
