"""Filters and parameters for the analytics pages, and the what-if calculator form."""

import copy

from django import forms

from traces.analysis.cycle import MAX_GROWTH, MAX_PENALTY, MAX_TOKENS, SECTION_8_1, Scenario
from traces.analysis.task_types import LABELS
from traces.analytics.selectors import PARAMETER_DEFAULTS, AnalyticsFilters
from traces.filters import SessionFilter
from traces.selectors import workspace_models


def _session_filter(name: str, **attrs) -> forms.Field:
    """The sessions FilterSet's field `name`: analytics filter sessions by the same names,
    choices and parsing as the sessions page and API."""
    field = copy.deepcopy(SessionFilter.base_filters[name].field)
    for attr, value in attrs.items():
        setattr(field, attr, value)
    return field


class AnalyticsFilterForm(forms.Form):
    started_after = _session_filter("started_after", label="From")
    started_before = _session_filter("started_before", label="To")
    harness = _session_filter("harness", label="Harness")
    model = _session_filter("model")
    project = _session_filter("project")
    task_type = forms.ChoiceField(
        required=False, label="Task type", choices=[("", "Any task type"), *LABELS.items()]
    )
    exclude_forks = forms.BooleanField(
        required=False,
        label="Exclude forked starts",
        help_text="Leave out agents forked from a loaded parent: they start high and skip "
        "the climb, which bends the cost law.",
    )
    band = forms.IntegerField(
        required=False,
        min_value=1000,
        max_value=500_000,
        label="Band (tokens)",
        help_text=f"default {PARAMETER_DEFAULTS['band']:,}",
    )
    upper_from = forms.IntegerField(
        required=False,
        min_value=10_000,
        max_value=2_000_000,
        label="D measured from",
        help_text=f"default {PARAMETER_DEFAULTS['upper_from']:,}",
    )
    fork_bound = forms.IntegerField(
        required=False,
        min_value=1000,
        max_value=5_000_000,
        label="Fork bound",
        help_text=f"default {PARAMETER_DEFAULTS['fork_bound']:,}",
    )

    def __init__(self, *args, workspace=None, **kwargs):
        """`workspace`: whose models the model filter offers (none without one)."""
        super().__init__(*args, **kwargs)
        if workspace is not None:
            self.fields["model"].set_models(workspace_models(workspace=workspace))

    def filters(self) -> AnalyticsFilters:
        data = self.cleaned_data if self.is_valid() else {}
        values = {}
        for name in ("started_after", "started_before"):
            if data.get(name):
                values[name] = data[name].isoformat()
        for name in ("harness", "model", "project", "task_type"):
            if data.get(name):
                values[name] = data[name].strip()
        if data.get("exclude_forks"):
            values["exclude_forks"] = True
        for name in ("band", "upper_from", "fork_bound"):
            if data.get(name):
                values[name] = int(data[name])
        return AnalyticsFilters(**values)


class WhatIfForm(forms.Form):
    # Upper bounds as in the API: beyond them no session exists and floats overflow.
    post_compaction_tokens = forms.FloatField(
        min_value=1, max_value=MAX_TOKENS, label="S: post-compaction context"
    )
    growth_per_step = forms.FloatField(max_value=MAX_GROWTH, label="D: growth per step")
    summary_tokens = forms.FloatField(
        min_value=0, max_value=MAX_TOKENS, label="SUMM: summary tokens"
    )
    penalty_steps = forms.FloatField(
        min_value=0, max_value=MAX_PENALTY, label="P: rediscovery penalty (steps)"
    )
    tail_tokens = forms.FloatField(
        min_value=0, max_value=MAX_TOKENS, required=False, label="Preserved tail (tokens)"
    )
    tail_penalty_steps = forms.FloatField(
        min_value=0, max_value=MAX_PENALTY, required=False, label="P with the tail (steps)"
    )
    compare_low = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_TOKENS, label="Exchange rate from T"
    )
    compare_high = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_TOKENS, label="to T"
    )
    disruption_steps = forms.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_PENALTY,
        label="L: disruption length (steps)",
        help_text="Steps after a compaction counted as degraded. Blank: your workspace's "
        "measured elevation (After compaction), else seed 001's 30.",
    )
    table_thresholds = forms.CharField(
        required=False,
        max_length=200,
        label="Thresholds for the table",
        help_text="Whole tokens, separated by commas (at most 12).",
    )

    def clean_table_thresholds(self):
        text = self.cleaned_data.get("table_thresholds") or ""
        values = []
        for part in text.replace(";", ",").split(","):
            part = part.strip().replace("_", "").replace(" ", "")
            if not part:
                continue
            if not part.isdigit():
                raise forms.ValidationError(f"{part!r} is not a whole number of tokens.")
            value = int(part)
            if not 1 <= value <= MAX_TOKENS:
                raise forms.ValidationError(f"{value:,} must be 1 to {MAX_TOKENS:,} tokens.")
            values.append(value)
        if len(values) > 12:
            raise forms.ValidationError("At most 12 thresholds.")
        return values

    def clean_growth_per_step(self):
        value = self.cleaned_data["growth_per_step"]
        if value <= 0:
            raise forms.ValidationError(
                "D must be greater than 0: context has to grow for the cycle to exist."
            )
        return value

    def clean(self):
        data = super().clean()
        low, high = data.get("compare_low"), data.get("compare_high")
        if low and high and low >= high:
            self.add_error("compare_high", "The second threshold must be larger than the first.")
        return data


class InstructionVisibilityForm(forms.Form):
    """The instruction to look for: free text or one from the context-file ledger."""

    instruction = forms.CharField(
        required=False,
        label="Instruction (free text)",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The words as they were given, e.g. a line of a system prompt.",
    )
    ledger_instruction = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        label="or an instruction from the ledger",
        help_text="Instructions of each context file's latest revision.",
    )
    delivery = forms.ChoiceField(required=False, label="Delivered")

    def __init__(self, *args, ledger=(), deliveries=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["ledger_instruction"].choices = [("", "—"), *ledger]
        self.fields["delivery"].choices = [
            ("", "default: recorded for free text, repository for the ledger"),
            *deliveries,
        ]


SCENARIO_KEYS = ("a", "b")


class ScenarioCompareForm(forms.Form):
    """Two fixed scenarios side by side (seed 001 §8.1), each with its own threshold, tail
    and P; S, D and SUMM are the calculator's. Prefilled with the §8.1 preset."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key in SCENARIO_KEYS:
            upper = key.upper()
            self.fields[f"{key}_name"] = forms.CharField(max_length=80, label=f"{upper}: name")
            self.fields[f"{key}_threshold"] = forms.IntegerField(
                min_value=1, max_value=MAX_TOKENS, label=f"{upper}: threshold T"
            )
            self.fields[f"{key}_tail"] = forms.FloatField(
                min_value=0, max_value=MAX_TOKENS, label=f"{upper}: preserved tail (tokens)"
            )
            self.fields[f"{key}_penalty"] = forms.FloatField(
                min_value=0, max_value=MAX_PENALTY, label=f"{upper}: P (steps)"
            )

    @staticmethod
    def preset() -> dict[str, str]:
        """The form's values for seed 001 §8.1."""
        values = {}
        for key, scenario in zip(SCENARIO_KEYS, SECTION_8_1, strict=True):
            values[f"{key}_name"] = scenario.name
            values[f"{key}_threshold"] = f"{scenario.threshold:.0f}"
            values[f"{key}_tail"] = f"{scenario.preserved_tail_tokens:.0f}"
            values[f"{key}_penalty"] = f"{scenario.penalty_steps:g}"
        return values

    def scenarios(self) -> list[Scenario]:
        data = self.cleaned_data
        return [
            Scenario(
                data[f"{key}_name"],
                data[f"{key}_threshold"],
                data[f"{key}_tail"],
                data[f"{key}_penalty"],
            )
            for key in SCENARIO_KEYS
        ]
