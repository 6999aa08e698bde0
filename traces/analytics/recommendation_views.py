"""The "compaction setting to use" section shared by the what-if and operating-limit pages."""

from __future__ import annotations

from django import forms

from traces.analysis.cycle import MAX_TOKENS, CycleInputError
from traces.analysis.task_types import LABELS
from traces.analytics.recommendation_selectors import compaction_recommendation


class RecommendationForm(forms.Form):
    model = forms.CharField(required=False, max_length=200, label="Model")
    task_type = forms.ChoiceField(
        required=False, label="Task type", choices=[("", "All task types"), *LABELS.items()]
    )
    in_use = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TOKENS,
        label="Threshold in use (tokens)",
        help_text="Leave empty to read it from Codex telemetry.",
    )


def recommendation_context(
    request, *, workspace, model: str | None = None, workload: str = ""
) -> dict:
    """`rec` (the selector's answer) and `rec_form` for the section; `model` (and the
    `workload` whose limit clips it) are fixed on the operating-limit page, else the model
    comes from the query (the what-if page)."""
    form = RecommendationForm(request.GET)
    context = {"rec_form": form, "rec_fixed_model": model}
    if not form.is_valid():
        return context
    data = form.cleaned_data
    chosen = (model or data["model"] or "").strip()
    if not chosen:
        return context
    try:
        answer = compaction_recommendation(
            workspace=workspace,
            model=chosen,
            task_type=data["task_type"] or "",
            workload=workload,
            in_use=data["in_use"],
        )
    except CycleInputError as exc:
        form.add_error("in_use" if exc.field == "in_use" else None, str(exc))
        return context
    context["rec"] = answer
    context["rec_values"] = answer.recommendation.as_dict() if answer.recommendation else None
    return context
