"""The what-if calculator: the measured cycle disruption and the scenarios built on it."""

from __future__ import annotations

from dataclasses import dataclass

from governance.models import Workspace
from traces.analysis.cycle import (
    DEFAULT_DISRUPTION_STEPS,
    CycleInputError,
    CycleParams,
    CycleResult,
    Scenario,
    check_disruption_steps,
    compare_scenarios,
    evaluate,
    exchange_rate,
    sensitivity,
    tail_scenario,
)
from traces.analytics.selectors.filters import AnalyticsFilters
from traces.analytics.selectors.jobs import result_for

SEED_FIRST5_RATIO = 2.37  # seed 001 §7.2: 41.9% against 17.7% in steps 1–5


def cycle_disruption(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters | None = None,
    given: float | None = None,
) -> dict:
    """The disruption length L behind the degraded share, and where it came from: `given`;
    else the measured `elevated_until_step` of the workspace's cached behaviour-after-
    compaction analysis for `filters` (unfiltered by default), with its n; else seed 001's
    30 steps, with the reason."""
    if given is not None:
        check_disruption_steps(given)
        return {"steps": given, "source": "given", "label": f"given, {given:g} steps"}
    stored = result_for(workspace=workspace, filters=filters or AnalyticsFilters())
    section = (stored.result or {}).get("post_compaction") if stored else None
    if section and section.get("elevated_until_step") is not None and not _zero_is_unsure(section):
        steps = section["elevated_until_step"]
        n = section.get("compactions", 0)
        return {
            "steps": steps,
            "source": "measured",
            "label": f"measured, {steps} steps (n = {n:,} compactions, "
            f"{section.get('operator_messages', 0):,} operator messages)",
            "compactions": n,
            "operator_messages": section.get("operator_messages"),
            "phrase_list_version": section.get("phrase_list_version"),
            "stale": stored.data_version != workspace.data_version,
        }
    why = _why_no_measured_disruption(section)
    return {
        "steps": DEFAULT_DISRUPTION_STEPS,
        "source": "default",
        "label": f"default {DEFAULT_DISRUPTION_STEPS} (seed 001 §7.3): {why}",
    }


def _why_no_measured_disruption(section: dict | None) -> str:
    """Why the cached behaviour-after-compaction section gives no disruption length."""
    if not section:
        return "the behaviour after compaction has not been computed for these filters"
    baseline = (section.get("baseline") or {}).get("correction") or {}
    if section.get("elevated_until_step") == 0:
        return (
            "steps 1–5 already overlap the baseline, but at this n the ratio of steps 1–5 to "
            f"the baseline cannot rule out the seed's {SEED_FIRST5_RATIO}× elevation: the data "
            "cannot tell how long a disruption lasts"
        )
    if baseline.get("ci") is None:
        return "too few operator messages in steps 60–150 to measure a baseline"
    return (
        "the measured correction rate had not come back to its baseline before the "
        "baseline window (steps 60–150) begins, so the workspace gives no end to it"
    )


def _zero_is_unsure(section: dict) -> bool:
    """A measured L of 0 (steps 1–5 overlap the baseline) only stands when the ratio of steps
    1–5 to the baseline is measured precisely enough to exclude the seed's elevation."""
    if section.get("elevated_until_step") != 0:
        return False
    ci = (section.get("ratio_first5_to_baseline") or {}).get("ci")
    return ci is None or ci[1] >= SEED_FIRST5_RATIO


@dataclass(frozen=True)
class WhatIf:
    params: CycleParams
    model: CycleResult
    tail: dict | None = None  # {"tail_tokens", "penalty_steps", "model": CycleResult.as_dict()}
    exchange: dict | None = None  # ExchangeRate.as_dict() between the two compared thresholds
    exchange_error: str | None = None
    sensitivity: list[dict] | None = None  # T* and its region for each P asked for
    scenarios: list[dict] | None = None  # compare_scenarios rows, the first the reference
    preserved_tail_tokens: float = 0  # already added to `params.post_compaction`
    disruption_steps: float = DEFAULT_DISRUPTION_STEPS


def what_if(
    *,
    post_compaction_tokens: float,
    growth_per_step: float,
    summary_tokens: float,
    penalty_steps: float,
    thresholds: list[float] | None = None,
    points: int = 200,
    tail_tokens: float | None = None,
    tail_penalty_steps: float = 0,
    compare: tuple[float, float] | None = None,
    penalties: list[float] | None = None,
    preserved_tail_tokens: float = 0,
    disruption_steps: float = DEFAULT_DISRUPTION_STEPS,
    scenarios: list[Scenario] | None = None,
) -> WhatIf:
    """The compaction-cycle model for S, D, SUMM and P (with f(T)/f(T*), steps per cycle,
    mean window and the share of steps in a `disruption_steps`-long degraded region at
    `thresholds`), and on request: the same with a preserved verbatim tail, the price of one
    avoided compaction between the two `compare` thresholds, the optimum's sensitivity to P
    (`penalties`, plus the given P) and fixed `scenarios` side by side. A
    `preserved_tail_tokens` raises S itself (P is then the P with that tail). The page and
    the API both answer from here.

    Raises CycleInputError naming the field; an impossible tail is named `tail_tokens` or
    `preserved_tail_tokens`. An exchange rate that cannot be priced is reported in
    `exchange_error`, not raised."""
    params = CycleParams(post_compaction_tokens, growth_per_step, summary_tokens, penalty_steps)
    params.validate()
    if preserved_tail_tokens:
        params = tail_scenario(params, preserved_tail_tokens, penalty_steps)
        try:
            params.validate()
        except CycleInputError as exc:
            raise CycleInputError("preserved_tail_tokens", f"S + tail: {exc}") from exc
    model = evaluate(
        params, thresholds=thresholds, points=points, disruption_steps=disruption_steps
    )
    tail = None
    if tail_tokens:
        tail_params = tail_scenario(params, tail_tokens, tail_penalty_steps or 0)
        try:
            tail_model = evaluate(tail_params).as_dict()
        except CycleInputError as exc:
            raise CycleInputError("tail_tokens", str(exc)) from exc
        tail = {
            "tail_tokens": tail_tokens,
            "penalty_steps": tail_params.penalty_steps,
            "model": tail_model,
        }
    exchange = exchange_error = None
    if compare:
        try:
            exchange = exchange_rate(params, *compare).as_dict()
        except CycleInputError as exc:
            exchange_error = str(exc)
    table = None
    if penalties is not None:
        table = sensitivity(params, sorted({*penalties, round(params.penalty_steps, 1)}))
    compared = None
    if scenarios:
        base = CycleParams(post_compaction_tokens, growth_per_step, summary_tokens, penalty_steps)
        compared = compare_scenarios(base, scenarios, disruption_steps)
    return WhatIf(
        params,
        model,
        tail,
        exchange,
        exchange_error,
        table,
        compared,
        preserved_tail_tokens,
        disruption_steps,
    )


def what_if_scenarios(base: CycleParams, scenarios: list[Scenario], disruption_steps: float):
    """Fixed scenarios side by side under `base`'s D and SUMM (each its own T, tail and P)."""
    return compare_scenarios(base, scenarios, disruption_steps)
