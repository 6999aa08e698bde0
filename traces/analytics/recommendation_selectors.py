"""The recommended auto-compact threshold for one model and task type (issue 19): gathers the
workspace's measured S, D, SUMM and P (the cached analytics for that model and task type),
the disruption length L, the approved operating limit and the setting in use, and hands
them to `traces.analysis.recommendation.recommend`. Reads only: never queues or writes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from governance.models import Workspace
from qualification.selectors import active_limit_for_model_id
from traces.analysis.cycle import CycleInputError
from traces.analysis.recommendation import Estimate, Recommendation, recommend
from traces.analysis.task_types import LABELS
from traces.analytics.selectors import AnalyticsFilters, cycle_disruption, result_for
from traces.models import Session

TELEMETRY_SESSIONS = 200  # the most recent sessions read for the setting in use
PARAMETERS = (
    ("post_compaction", "S"),
    ("growth_per_step", "D"),
    ("summary", "SUMM"),
    ("penalty_steps", "P"),
)


@dataclass
class CompactionRecommendation:
    model: str
    task_type: str
    status: str  # "ok", "insufficient_data" (see `missing`) or "not_computed"
    filters: AnalyticsFilters
    missing: list[str] = field(default_factory=list)
    recommendation: Recommendation | None = None
    parameters: dict | None = None  # S, D, SUMM, P: value, ci, n, method
    compactions: int | None = None
    stale: bool = False
    computed_at: object = None
    disruption: dict | None = None
    limit: dict | None = None  # the approved limit the ceiling comes from
    in_use: dict | None = None  # {"tokens", "source", "label", ...}

    @property
    def task_type_label(self) -> str:
        return LABELS.get(self.task_type, "all task types") if self.task_type else "all task types"


def setting_in_use(*, workspace: Workspace, model: str) -> dict | None:
    """The auto-compact threshold Codex reported (`auto_compact_token_limit` of
    codex.conversation_starts) on the workspace's most recent sessions of `model` (by its
    whole name, as the analytics filter matches): the most common value, with n."""
    wanted = model.strip()
    rows = (
        Session.objects.filter(workspace=workspace, auto_compact_token_limit__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("model_names", "auto_compact_token_limit")[:TELEMETRY_SESSIONS]
    )
    values = [limit for names, limit in rows if wanted in (names or [])]
    if not values:
        return None
    counts = Counter(values)
    tokens, n = counts.most_common(1)[0]
    label = (
        f"reported by Codex (codex.conversation_starts auto_compact_token_limit) on {n:,} of "
        f"the {len(values):,} most recent sessions of this model that report one"
    )
    if len(counts) > 1:
        label += f"; {len(counts) - 1} other value(s) seen"
    return {
        "tokens": int(tokens),
        "source": "telemetry",
        "label": label,
        "sessions": len(values),
        "agreeing": n,
    }


def _limit_ceiling(*, workspace: Workspace, model: str, workload: str) -> tuple[dict | None, str]:
    """The approved limit's qualified ECL (its weakest family's), maximum context and reserve,
    or why there is none."""
    active = active_limit_for_model_id(workspace=workspace, model_id=model, workload=workload)
    limit = active.limit
    if limit is None:
        return None, (
            f"no approved operating limit for {model}"
            + (f" and workload {workload}" if workload else "")
            + ": the optimum is not clipped. Propose and approve one under Qualification → "
            "Operating limits."
        )
    family = active.weakest_family or {}
    ecl = family.get("ecl_tokens")
    established = ecl is not None
    source = f"qualified ECL of the weakest family ({family.get('family') or 'unnamed'})"
    if not established:
        ecl = limit.max_context_tokens
        source = (
            "the approved maximum context (the weakest family's ECL is not established: "
            f"{family.get('ecl_text') or 'no ECL in the justification'})"
        )
    return {
        "id": limit.pk,
        "name": limit.name,
        "workload": limit.qualification.workload.name,
        "model_name": limit.qualification.configuration.model_name,
        "ecl_tokens": int(ecl),
        "ecl_established": established,  # False: ecl_tokens is the max context
        "ecl_source": source,
        "reserve_tokens": limit.reserve_tokens,
        "max_context_tokens": limit.max_context_tokens,
        "candidates": active.candidates,
    }, ""


def _unmeasured(stored) -> list[str]:
    """Why the stored analytics give no S, D, SUMM and P ([] when they do)."""
    result = stored.result or {}
    measured = result.get("cycle_parameters")
    if measured and measured.get("usable"):
        return []
    failure = (result.get("failures") or {}).get("cycle_parameters")
    return (measured or {}).get("reasons") or [failure or "the cycle parameters were not measured"]


def _estimates(measured: dict) -> tuple[dict, dict]:
    """The four parameters as shown (value, ci, n, unit, method) and as `Estimate`s."""
    shown = {
        label: {name: measured[key][name] for name in ("value", "ci", "n", "unit", "method")}
        for key, label in PARAMETERS
    }
    estimates = {
        key: Estimate(
            measured[key]["value"],
            tuple(measured[key]["ci"]) if measured[key]["ci"] else None,
            measured[key]["n"],
        )
        for key, _ in PARAMETERS
    }
    return shown, estimates


def compaction_recommendation(
    *,
    workspace: Workspace,
    model: str,
    task_type: str = "",
    workload: str = "",
    in_use: int | None = None,
) -> CompactionRecommendation:
    """The recommendation for `model` and `task_type` ("" for all): from the cached analytics
    for exactly those filters. `in_use`, when given, is the setting entered by the user;
    otherwise the one Codex telemetry reports, if any. Raises CycleInputError naming the
    field when an entered setting or the limit's reserve cannot be used."""
    filters = AnalyticsFilters(model=model, task_type=task_type)
    answer = CompactionRecommendation(
        model=model, task_type=task_type, status="ok", filters=filters
    )
    stored = result_for(workspace=workspace, filters=filters)
    if stored is None:
        answer.status = "not_computed"
        answer.missing.append(
            f"the analytics for {filters.describe()} have not been computed: S, D, SUMM and P "
            "are measured there"
        )
        return answer
    answer.stale = stored.data_version != workspace.data_version
    answer.computed_at = stored.computed_at
    if reasons := _unmeasured(stored):
        answer.status = "insufficient_data"
        answer.missing.extend(reasons)
        return answer
    measured = stored.result["cycle_parameters"]
    answer.compactions = measured.get("compactions")
    answer.parameters, estimates = _estimates(measured)
    answer.disruption = cycle_disruption(workspace=workspace, filters=filters)
    answer.limit, why = _limit_ceiling(workspace=workspace, model=model, workload=workload)
    if why:
        answer.missing.append(why)
    if in_use is not None:
        answer.in_use = {"tokens": in_use, "source": "entered", "label": "entered"}
    else:
        answer.in_use = setting_in_use(workspace=workspace, model=model)
    bootstrap = measured.get("optimum_ci")
    limit = answer.limit or {}

    def run(tokens: int | None) -> Recommendation:
        return recommend(
            s=estimates["post_compaction"],
            d=estimates["growth_per_step"],
            summ=estimates["summary"],
            p=estimates["penalty_steps"],
            # The ECL bounds it only when established (else it is the max context again).
            ecl_tokens=limit.get("ecl_tokens") if limit.get("ecl_established") else None,
            max_context_tokens=limit.get("max_context_tokens"),
            reserve_tokens=limit.get("reserve_tokens"),
            disruption_steps=answer.disruption["steps"],
            in_use=tokens,
            bootstrap_interval=tuple(bootstrap) if bootstrap else None,
        )

    try:
        answer.recommendation = run(answer.in_use["tokens"] if answer.in_use else None)
    except CycleInputError as exc:
        if exc.field != "in_use" or answer.in_use["source"] == "entered":
            raise
        # A reported setting the model cannot place (at or below S): shown, not priced.
        answer.in_use["label"] += f" ({exc})"
        answer.recommendation = run(None)
    return answer
