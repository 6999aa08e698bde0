"""What a sweep analysis returns: per stratum, per family and for the whole sweep."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numfmt
from qualification.analysis import ecl as ecl_mod
from qualification.analysis.intervals import (
    Interval,
)
from qualification.analysis.refusals import (
    Refusal,
)


@dataclass(frozen=True)
class StratumResult:
    tokens: int
    tasks: int
    repeats: int  # fewest repeats of any task here
    repeats_max: int
    trials: int
    accuracy: float | None
    ci: list[float | None]
    lower_bound: float | None
    passes: bool  # lower bound ≥ θ
    accuracy_method: str
    reliability: float | None  # mean per-task pass^k
    reliability_ci: list[float | None]
    retrieval: float | None
    retrieval_ci: list[float | None]
    retrieval_tasks: int
    input_tokens: float | None
    input_tokens_ci: list[float | None]
    output_tokens: float | None
    model_calls: float | None
    tool_calls: float | None
    cost: float | None
    cost_ci: list[float | None]
    cost_per_success: float | None
    latency_ms: float | None


@dataclass(frozen=True)
class FamilyResult:
    family: str
    tasks: int
    trials: int
    strata: list[StratumResult]
    refusals: list[Refusal]
    ecl_tokens: int | None
    ecl_status: str
    ecl_text: str
    ecl_lower95_tokens: int | None
    ecl_lower_tokens: int | None
    ecl_lower_confidence: float
    ecl_interval_tokens: list[int | None]
    p_ecl_at_least: list[float] | None
    knee_tokens: int | None
    knee: dict | None
    saturation_tokens: int | None
    saturation: dict | None
    hinge: dict | None
    kneedle_knee_tokens: int | None
    kneedle_saturation_tokens: int | None
    kneedle_note: str
    gee: dict | None
    ruler: dict | None
    reliability_k: int | None
    reliability_ecl_tokens: int | None
    reliability_ecl_status: str


@dataclass(frozen=True)
class SweepResult:
    status: str  # "ok" | "insufficient"
    reasons: list[Refusal]
    families: list[FamilyResult]
    overall: FamilyResult | None
    weakest_family: str | None
    proposed_limit_tokens: int | None
    proposal: dict
    strata: list[int]
    trials: int
    params: dict
    methods: dict = field(default_factory=dict)
    weakest_family_reason: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def ecl_text(tokens: int | None, status: str, strata: list[int]) -> str:
    if status == ecl_mod.ECL_REFUSED:
        return "refused"
    if status == ecl_mod.ECL_BELOW_SMALLEST:
        return f"< {numfmt.tokens(strata[0])} (smallest tested)" if strata else "–"
    if status == ecl_mod.ECL_AT_LEAST_LARGEST:
        return f"≥ {numfmt.tokens(tokens)} (largest tested)"
    return numfmt.tokens(tokens)


def _interval(i: Interval) -> list[float | None]:
    return [i.low, i.high]


def _nan_to_none(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value
