"""Forms of the annotation pages (the API has its own serializers; both end in one service)."""

import re

from django import forms

from traces.annotations.analysis.classes import CONFIDENCES, FAILURE_CLASSES

CLASS_CHOICES = [(slug, label) for slug, (label, _) in FAILURE_CLASSES.items()]


def parse_indexes(raw: str) -> list[int]:
    """'12, 40 41' -> [12, 40, 41]; anything else is an error naming the bad part."""
    values = []
    for part in re.split(r"[\s,;]+", (raw or "").strip()):
        if not part:
            continue
        part = part.lstrip("#")
        if not part.isdigit():
            raise forms.ValidationError(f"'{part}' is not a call number.")
        values.append(int(part))
    return values


class MarkForm(forms.Form):
    call_index = forms.IntegerField(
        min_value=0,
        label="Step (call #)",
        help_text="The call number shown on the step; j/k and d fill it in.",
    )
    failure_class = forms.ChoiceField(
        choices=CLASS_CHOICES, widget=forms.RadioSelect, label="What went wrong"
    )
    other_text = forms.CharField(
        required=False,
        max_length=500,
        label="If other: what",
        help_text="Required for Other; left empty, the note is used.",
        widget=forms.TextInput(attrs={"aria-describedby": "id_other_text_help"}),
    )
    confidence = forms.ChoiceField(
        choices=list(CONFIDENCES.items()), widget=forms.RadioSelect, label="Confidence"
    )
    evidence = forms.CharField(
        required=False,
        max_length=1000,
        label="Evidence (earlier calls)",
        help_text="Call numbers of earlier steps that show why, e.g. where the forgotten "
        "constraint was given: 12, 40. Press e on a step to add it.",
    )
    note = forms.CharField(
        required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 3})
    )

    def clean_evidence(self):
        return parse_indexes(self.cleaned_data.get("evidence", ""))

    def clean(self):
        data = super().clean()
        if (
            data.get("failure_class") == "other"
            and not (data.get("other_text") or "").strip()
            and not (data.get("note") or "").strip()
        ):
            self.add_error(
                "other_text", "Say what went wrong when the class is Other (here or in the note)."
            )
        return data


class AdjudicateForm(forms.Form):
    adopt = forms.IntegerField(required=False, widget=forms.HiddenInput)
    call_index = forms.IntegerField(required=False, min_value=0, label="Final step (call #)")
    failure_class = forms.ChoiceField(
        required=False, choices=[("", "—"), *CLASS_CHOICES], label="Final class"
    )
    other_text = forms.CharField(required=False, max_length=500, label="If other: what")
    confidence = forms.ChoiceField(
        required=False, choices=[("", "—"), *CONFIDENCES.items()], label="Confidence"
    )
    evidence = forms.CharField(required=False, max_length=1000, label="Evidence (earlier calls)")
    note = forms.CharField(
        required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2}), label="Why"
    )

    def clean_evidence(self):
        return parse_indexes(self.cleaned_data.get("evidence", ""))

    def clean(self):
        data = super().clean()
        if data.get("adopt") is None:
            for name in ("call_index", "failure_class", "confidence"):
                if data.get(name) in (None, ""):
                    self.add_error(name, "Required unless you adopt a mark.")
        return data


class QueueForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="e.g. “Checkout runs over 150k, March”.")
    sample_size = forms.IntegerField(
        min_value=1, max_value=1000, initial=20, help_text="Runs drawn at random from the filter."
    )
    annotators = forms.ModelMultipleChoiceField(
        queryset=None,
        widget=forms.CheckboxSelectMultiple,
        help_text="Members with the editor role or higher.",
    )
    annotators_per_run = forms.IntegerField(
        min_value=1,
        max_value=10,
        initial=2,
        help_text="Two or more to measure agreement (kappa).",
    )
    agreement_window = forms.IntegerField(
        min_value=0, max_value=1000, initial=3, label="Same step within ±N steps"
    )
    seed = forms.IntegerField(
        required=False, min_value=1, help_text="Leave empty for a random seed (it is recorded)."
    )

    def __init__(self, *args, users=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["annotators"].queryset = users
        self.fields["annotators"].label_from_instance = lambda u: u.get_username()
