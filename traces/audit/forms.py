"""Forms of the audit pages: the strata filter, the create form (strata sizes come from the
strata table) and the judgment form of one step."""

from __future__ import annotations

from django import forms

from traces.annotations.analysis.classes import CONFIDENCES
from traces.audit.analysis.fractions import COUNTERFACTUALS

SIZE_PREFIX = "size:"


class StrataFilterForm(forms.Form):
    """The filter of the strata table (a GET form). Forked starts are excluded by default: the
    `filtered` marker tells an unticked box from a first visit."""

    exclude_forks = forms.BooleanField(
        required=False,
        label="Exclude forked starts",
        help_text="Leave out agents forked from a loaded parent (start kind fork): they start "
        "with their parent's window rather than a conversation of their own.",
    )
    filtered = forms.CharField(required=False, widget=forms.HiddenInput)

    @classmethod
    def from_query(cls, query) -> StrataFilterForm:
        data = query if query.get("filtered") else {"filtered": "1", "exclude_forks": "on"}
        form = cls(data)
        form.is_valid()
        return form

    @property
    def exclude(self) -> bool:
        return bool(self.cleaned_data.get("exclude_forks"))


class AuditCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    seed = forms.IntegerField(
        required=False, min_value=0, max_value=2**62,
        help_text="Leave empty for a random seed; it is stored, so the sample can be drawn again.",
    )  # fmt: skip

    exclude_forks = forms.BooleanField(
        required=False,
        widget=forms.HiddenInput,
        help_text="Set by the strata filter above the table, so that the sample is drawn from "
        "the steps the table counts.",
    )

    def __init__(self, *args, strata: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.strata = strata

    def clean(self):
        cleaned = super().clean()
        cleaned["strata_sizes"] = self.sizes()
        return cleaned

    def sizes(self) -> dict[str, int]:
        """The steps typed in the strata table ('size:<task>|<band>' fields); bad ones are
        form errors naming the stratum."""
        sizes, errors = {}, []
        for key, raw in self.data.items():
            if not key.startswith(SIZE_PREFIX):
                continue
            stratum = key[len(SIZE_PREFIX) :]
            raw = (raw or "").strip()
            if not raw:
                continue
            try:
                value = int(raw)
            except ValueError:
                errors.append(f"{stratum}: '{raw}' is not a whole number")
                continue
            if value < 0:
                errors.append(f"{stratum}: a size is 0 or more")
            elif value:
                sizes[stratum] = value
        if errors:
            raise forms.ValidationError("Strata sizes: " + "; ".join(errors) + ".")
        return sizes


class JudgmentForm(forms.Form):
    active_item_ids = forms.TypedMultipleChoiceField(
        coerce=int, required=False, widget=forms.CheckboxSelectMultiple
    )
    helpful_item_ids = forms.TypedMultipleChoiceField(
        coerce=int, required=False, widget=forms.CheckboxSelectMultiple
    )
    verbatim_needed = forms.BooleanField(
        required=False,
        label="A verbatim form of older context was needed",
        help_text="The step needed the exact text (a search string, a literal command), not "
        "what a summary would carry.",
    )
    counterfactual = forms.ChoiceField(
        choices=list(COUNTERFACTUALS.items()), widget=forms.RadioSelect
    )
    confidence = forms.ChoiceField(choices=list(CONFIDENCES.items()), widget=forms.RadioSelect)
    note = forms.CharField(
        required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2})
    )

    def __init__(self, *args, had_through_item: int, **kwargs):
        super().__init__(*args, **kwargs)
        choices = [(i, str(i)) for i in range(1, had_through_item + 1)]
        self.fields["active_item_ids"].choices = choices
        self.fields["helpful_item_ids"].choices = choices
