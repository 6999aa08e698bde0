"""Forms for the qualification pages. Services do the checking; `apply_input_error` puts a
service's "field: message" error next to the field it names."""

from __future__ import annotations

from django import forms

from qualification.analysis.limits import RESERVE_ACTIONS, SOURCE_SUGGESTIONS
from qualification.analysis.sweep import AnalysisParams
from qualification.models import Consequence, FamilyKind, QualificationStatus
from qualification.services.limits import APPROVAL_CONFIRMATION, COMMENT_MAX_CHARS

STANDARD_FAMILIES = [(k, label) for k, label in FamilyKind.choices if k != FamilyKind.CUSTOM]
ACTION_CHOICES = list(RESERVE_ACTIONS.items())

FIELD_ALIASES = {
    "model": "model_name",
    "workload": "workload_name",
    "configuration": "decoding",
    "decoding": "decoding",
    "families": "custom_families",
    "allocation": "__all__",
}


def apply_input_error(form: forms.Form, message: str) -> None:
    """Attach "field: message" to its field when the form has it, else to the whole form."""
    head, _, rest = message.partition(":")
    key = head.strip().split(".")[0].split("[")[0]
    if head.strip().startswith("configuration.decoding"):
        key = "decoding"
    key = FIELD_ALIASES.get(key, key)
    if rest and key in form.fields:
        form.add_error(key, rest.strip())
    elif rest and key in {f.name for f in _param_fields()} and "analysis_params" in form.fields:
        form.add_error("analysis_params", message)
    else:
        form.add_error(None, message)


def _param_fields():
    from dataclasses import fields

    return fields(AnalysisParams)


class QualificationForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="e.g. “Sonnet on repo maintenance, May”.")
    model_name = forms.CharField(label="Model name", max_length=200)
    model_version = forms.CharField(label="Model version", max_length=200)
    decoding = forms.JSONField(
        label="Decoding settings",
        required=False,
        initial={"temperature": 0},
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='JSON, e.g. {"temperature": 0, "max_output_tokens": 8192}.',
    )
    harness_version = forms.CharField(max_length=200, required=False)
    prompt_version = forms.CharField(max_length=200, required=False)
    evaluator_version = forms.CharField(max_length=200, required=False)
    workload_name = forms.CharField(label="Workload name", max_length=200)
    workload_version = forms.CharField(label="Workload version", max_length=100)
    families = forms.MultipleChoiceField(
        label="Task families",
        choices=STANDARD_FAMILIES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Used when the workload version is new; an existing one keeps its families "
        "and gains any you add.",
    )
    custom_families = forms.CharField(
        label="Custom families",
        required=False,
        help_text="Comma-separated keys, e.g. migration_planning, flaky_test_triage.",
    )
    strata = forms.CharField(
        label="Strata (tokens)",
        required=False,
        help_text="Context sizes of the sweep, e.g. 8k, 16k, 32k, 64k, 128k. Empty: taken from "
        "the trials.",
    )
    threshold = forms.FloatField(
        label="Reliability threshold θ",
        min_value=0.01,
        max_value=0.99,
        initial=0.85,
        help_text="Pre-registered from the workload, before any trial is seen.",
    )
    consequence = forms.ChoiceField(
        choices=Consequence.choices,
        initial=Consequence.MEDIUM,
        widget=forms.RadioSelect,
        help_text="Sets the margin and confidence: low ×1.0 at 90%, medium ×0.75 at 95%, high "
        "×0.5 at 99% with Clopper–Pearson intervals.",
    )
    supersedes = forms.TypedChoiceField(
        label="Requalification of",
        required=False,
        coerce=int,
        empty_value=None,
        help_text="The previous qualification of the same model and workload, if any.",
    )
    analysis_params = forms.JSONField(
        label="Analysis parameter overrides",
        required=False,
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='Optional JSON, e.g. {"knee_delta": 0.05, "bootstrap_replicates": 2000}. '
        "Every default is listed on the results page.",
    )
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, supersede_choices=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["supersedes"].choices = [("", "— none —"), *supersede_choices]

    def clean_decoding(self):
        value = self.cleaned_data.get("decoding")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Give an object, e.g. {"temperature": 0}.')
        return value

    def clean_analysis_params(self):
        value = self.cleaned_data.get("analysis_params")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            raise forms.ValidationError("Give an object of parameter overrides.")
        return value

    def service_kwargs(self) -> dict:
        data = self.cleaned_data
        families = list(data.get("families") or [])
        families += [f.strip() for f in (data.get("custom_families") or "").split(",") if f.strip()]
        return {
            "name": data["name"],
            "model": {"name": data["model_name"], "version": data["model_version"]},
            "configuration": {
                "decoding": data.get("decoding") or {},
                "harness_version": data.get("harness_version", ""),
                "prompt_version": data.get("prompt_version", ""),
                "evaluator_version": data.get("evaluator_version", ""),
            },
            "workload": {
                "name": data["workload_name"],
                "version": data["workload_version"],
                "families": families or None,
            },
            "threshold": data["threshold"],
            "consequence": data["consequence"],
            "strata": data.get("strata") or [],
            "analysis_params": data.get("analysis_params") or {},
            "notes": data.get("notes", ""),
        }


class TrialUploadForm(forms.Form):
    file = forms.FileField(
        label="Trials file",
        help_text="CSV (with a header), JSON Lines or a JSON array; one row per trial.",
    )
    partial = forms.BooleanField(
        required=False,
        label="Partial batch",
        help_text="More strata follow later: check pairing at analysis instead of now.",
    )


class LimitForm(forms.Form):
    name = forms.CharField(max_length=200)
    max_context_tokens = forms.IntegerField(
        label="Maximum context",
        min_value=1,
        help_text="The most context a trajectory may reach. At most the qualification's proposed "
        "limit.",
    )
    reserve_tokens = forms.IntegerField(
        label="Reserve",
        min_value=0,
        help_text="Kept free for tool output and correction.",
    )
    max_initial_assembly_tokens = forms.IntegerField(
        label="Maximum initial assembly",
        min_value=0,
        help_text="At most the maximum context minus the reserve.",
    )
    reserve_action = forms.ChoiceField(
        label="When the reserve is exhausted", choices=ACTION_CHOICES
    )
    rationale = forms.CharField(
        label="Why this margin",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The consequence of failure and how results are verified.",
    )

    def clean(self):
        data = super().clean()
        context, reserve, assembly = (
            data.get("max_context_tokens"),
            data.get("reserve_tokens"),
            data.get("max_initial_assembly_tokens"),
        )
        if None not in (context, reserve, assembly) and assembly > context - reserve:
            self.add_error(
                "max_initial_assembly_tokens",
                f"At most {max(context - reserve, 0):,}: the maximum context minus the reserve.",
            )
        return data


class LimitApproveForm(forms.Form):
    """The reviewer's confirmation and comment. The service checks the confirmation, so a page
    and an API call without it are refused alike."""

    confirm = forms.BooleanField(required=False, label=APPROVAL_CONFIRMATION)
    comment = forms.CharField(
        label="Comment (optional)",
        required=False,
        max_length=COMMENT_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Kept in the audit log with the approval and shown on this limit.",
    )
    reviewed = forms.CharField(required=False, widget=forms.HiddenInput)


class SourceLimitForm(forms.Form):
    source = forms.CharField(
        max_length=64,
        required=False,
        widget=forms.TextInput(attrs={"list": "source-suggestions", "placeholder": "source"}),
    )
    tokens = forms.IntegerField(min_value=0, required=False)

    def clean(self):
        data = super().clean()
        if data.get("source") and data.get("tokens") is None:
            self.add_error("tokens", "Give the source's limit in tokens.")
        if data.get("tokens") is not None and not data.get("source"):
            self.add_error("source", "Name the source.")
        return data


class StageBudgetForm(forms.Form):
    key = forms.SlugField(max_length=64, required=False)
    label = forms.CharField(max_length=200, required=False)
    max_tokens = forms.IntegerField(min_value=1, required=False)
    target_tokens = forms.IntegerField(min_value=1, required=False)
    action = forms.ChoiceField(choices=[("", "(reserve action)"), *ACTION_CHOICES], required=False)

    def clean(self):
        data = super().clean()
        if data.get("key") and not data.get("max_tokens"):
            self.add_error("max_tokens", "Give the stage's budget.")
        if data.get("max_tokens") and not data.get("key"):
            self.add_error("key", "Name the stage.")
        return data


SourceLimitFormSet = forms.formset_factory(SourceLimitForm, extra=2, max_num=40)
StageBudgetFormSet = forms.formset_factory(StageBudgetForm, extra=1, max_num=20)


def formset_sources(formset) -> dict:
    return {
        f.cleaned_data["source"].strip(): f.cleaned_data["tokens"]
        for f in formset
        if f.cleaned_data.get("source")
    }


def formset_stages(formset) -> list[dict]:
    return [
        {
            "key": f.cleaned_data["key"],
            "label": f.cleaned_data.get("label") or f.cleaned_data["key"],
            "max_tokens": f.cleaned_data["max_tokens"],
            "target_tokens": f.cleaned_data.get("target_tokens"),
            "action": f.cleaned_data.get("action") or "",
        }
        for f in formset
        if f.cleaned_data.get("key")
    ]


class AllocationForm(forms.Form):
    source = forms.CharField(
        max_length=64,
        required=False,
        widget=forms.TextInput(attrs={"list": "source-suggestions", "placeholder": "source"}),
    )
    tokens = forms.IntegerField(min_value=0, required=False)


AllocationFormSet = forms.formset_factory(AllocationForm, extra=2, max_num=40)


class BudgetCheckForm(forms.Form):
    stage = forms.ChoiceField(required=False)
    run_ref = forms.CharField(
        label="Run or session", max_length=200, required=False, help_text="Optional reference."
    )
    assembled_prompt = forms.CharField(
        label="Assembled prompt",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Optional: kept verbatim with the audit.",
    )
    omissions = forms.CharField(
        label="Truncations and omissions",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One decision per line, e.g. “omitted: lockfile (9,800 tokens)”.",
    )

    def __init__(self, *args, stages=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["stage"].choices = [("", "Initial assembly"), *stages]

    def omission_list(self) -> list[dict]:
        lines = (self.cleaned_data.get("omissions") or "").splitlines()
        decisions = []
        for line in filter(None, (item.strip() for item in lines)):
            head, _, rest = line.partition(":")
            if rest and head.strip().lower() in (
                "omitted",
                "truncated",
                "summarised",
                "summarized",
            ):
                decisions.append({"decision": head.strip().lower(), "note": rest.strip()})
            else:
                decisions.append({"decision": "omitted", "note": line})
        return decisions


SUPERSEDABLE = [QualificationStatus.COLLECTING, QualificationStatus.LOCKED]
SOURCE_NAMES = list(SOURCE_SUGGESTIONS)
