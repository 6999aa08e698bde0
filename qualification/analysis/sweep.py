"""A whole context-size sweep: per family and overall, the four outcomes per stratum, the ECL
with its uncertainty, knee, saturation, refusals and the proposed production limit.

Input is a plain table of trials (a pandas DataFrame); output is a `SweepResult` dataclass.
Every default of METHODS.md §7 is a field of `AnalysisParams` and is recorded with the result.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np
import pandas as pd

import numfmt
from qualification.analysis import ecl as ecl_mod
from qualification.analysis.intervals import (
    BINOMIAL_METHODS,
    Interval,
    mean_t_interval,
    pass_hat_k,
    ruler_weighted_averages,
    task_clustered_interval,
)
from qualification.analysis.knee import hinge_fit, kneedle_crosscheck, paired_drop_knee
from qualification.analysis.limits import CONSEQUENCE_DEFAULTS, FamilyBasis, propose_limit
from qualification.analysis.refusals import (
    RULE_MIN_REPEATS,
    RULE_MIN_TASKS,
    RULE_UNPAIRED,
    Refusal,
    check_refusals,
)
from qualification.analysis.saturation import saturation_point

OVERALL = "overall"
# METHODS.md §7: R < 3 repeats per stratum is refused; an override may raise min_repeats, never
# lower it below this.
MIN_REPEATS_FLOOR = 3
COLUMNS = [
    "family", "task", "stratum", "repeat", "task_correct", "retrieval_correct",
    "input_tokens", "output_tokens", "model_calls", "tool_calls", "cost", "latency_ms",
]  # fmt: skip


@dataclass(frozen=True)
class AnalysisParams:
    """Every choice the analysis makes. Defaults follow METHODS.md §7 and the consequence."""

    threshold: float
    consequence: str = "medium"
    alpha: float = 0.05  # one-sided, per stratum and for the fixed-sequence tests (.01 if high)
    interval_method: str = "wilson"
    min_repeats: int = MIN_REPEATS_FLOOR
    bootstrap_replicates: int = 2000
    bootstrap_seed: int = 20250101
    lower_ecl_confidence: float = 0.95  # the consequence's confidence, used by the limit rule
    knee_delta: float = 0.05
    knee_confidence: float = 0.95
    saturation_epsilon: float = 0.03
    saturation_confidence: float = 0.95
    kneedle_sensitivity: float = 1.0
    kneedle_min_strata: int = 5
    gee_confidence: float = 0.90
    margin_factor: float = 0.75
    reliability_k: int | None = None  # None: the fewest repeats any task has
    reliability_threshold: float | None = None  # None: θ
    limit_families: tuple[str, ...] | None = None  # None: every family must stay reliable

    @classmethod
    def for_qualification(
        cls, *, threshold: float, consequence: str, overrides: dict | None = None
    ) -> AnalysisParams:
        """Defaults for the consequence, then the recorded overrides, validated by name."""
        if consequence not in CONSEQUENCE_DEFAULTS:
            raise ValueError(f"consequence: must be one of {', '.join(CONSEQUENCE_DEFAULTS)}")
        preset = CONSEQUENCE_DEFAULTS[consequence]
        params = cls(
            threshold=threshold,
            consequence=consequence,
            alpha=preset["alpha"],
            interval_method=preset["interval_method"],
            lower_ecl_confidence=preset["confidence"],
            margin_factor=preset["margin_factor"],
        )
        overrides = dict(overrides or {})
        names = {f.name for f in fields(cls)} - {"threshold", "consequence"}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ValueError(
                f"analysis_params: unknown parameter {unknown[0]!r}; known: {', '.join(sorted(names))}"
            )
        if overrides.get("limit_families") is not None:
            overrides["limit_families"] = tuple(overrides["limit_families"])
        params = replace(params, **overrides)
        params.validate()
        return params

    def validate(self) -> None:
        def bad(name, why):
            raise ValueError(f"{name}: {why}")

        if not 0 < self.threshold < 1:
            bad("threshold", "must be strictly between 0 and 1")
        if not 0 < self.alpha < 0.5:
            bad("alpha", "must be between 0 and 0.5 (one-sided)")
        if self.interval_method not in BINOMIAL_METHODS:
            bad("interval_method", f"must be one of {', '.join(BINOMIAL_METHODS)}")
        if (
            not isinstance(self.min_repeats, int)
            or isinstance(self.min_repeats, bool)
            or self.min_repeats < MIN_REPEATS_FLOOR
        ):
            bad(
                "min_repeats",
                f"must be a whole number of at least {MIN_REPEATS_FLOOR}: with fewer repeats "
                "reliability across repeats cannot be estimated, so the sweep must be refused "
                "(METHODS.md §7)",
            )
        if (
            not isinstance(self.bootstrap_replicates, int)
            or not 200 <= self.bootstrap_replicates <= 20000
        ):
            bad("bootstrap_replicates", "must be an integer from 200 to 20000")
        for name in (
            "lower_ecl_confidence",
            "knee_confidence",
            "saturation_confidence",
            "gee_confidence",
        ):
            if not 0.5 <= getattr(self, name) < 1:
                bad(name, "must be at least 0.5 and below 1")
        for name in ("knee_delta", "saturation_epsilon"):
            if not 0 < getattr(self, name) < 1:
                bad(name, "must be between 0 and 1")
        if not 0 < self.margin_factor <= 1:
            bad("margin_factor", "must be in (0, 1]: a margin never raises the limit")
        if self.reliability_k is not None and (
            not isinstance(self.reliability_k, int) or self.reliability_k < 1
        ):
            bad("reliability_k", "must be a positive integer")
        if self.reliability_threshold is not None and not 0 < self.reliability_threshold < 1:
            bad("reliability_threshold", "must be strictly between 0 and 1")

    def as_dict(self) -> dict:
        data = asdict(self)
        data["limit_families"] = list(self.limit_families) if self.limit_families else None
        return data


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


def _cells(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per task × stratum with repeat counts, passes and per-task means."""
    grouped = frame.groupby(["task", "stratum"], sort=True)
    return grouped.agg(
        repeats=("task_correct", "size"),
        correct=("task_correct", "sum"),
        retrieval_n=("retrieval_correct", "count"),
        retrieval_sum=("retrieval_correct", "sum"),
        input_tokens=("input_tokens", "mean"),
        output_tokens=("output_tokens", "mean"),
        model_calls=("model_calls", "mean"),
        tool_calls=("tool_calls", "mean"),
        cost=("cost", "mean"),
        cost_sum=("cost", "sum"),
        cost_n=("cost", "count"),
        latency_ms=("latency_ms", "mean"),
    )


def _family_rng(params: AnalysisParams, family: str) -> np.random.Generator:
    return np.random.default_rng([params.bootstrap_seed, zlib.crc32(family.encode())])


def _nan_to_none(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def analyse_family(family: str, frame: pd.DataFrame, params: AnalysisParams) -> FamilyResult:
    cells = _cells(frame)
    tasks = [str(t) for t in cells.index.get_level_values("task").unique()]
    strata = sorted(int(s) for s in cells.index.get_level_values("stratum").unique())

    def grid(column: str, fill=np.nan) -> np.ndarray:
        table = cells[column].unstack("stratum").reindex(index=tasks, columns=strata)
        return table.to_numpy(dtype=float, na_value=fill)

    repeats = np.nan_to_num(grid("repeats"), nan=0.0).astype(int)
    correct = np.nan_to_num(grid("correct"), nan=0.0)
    present = repeats > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(present, correct / np.maximum(repeats, 1), np.nan)
        retrieval_rates = grid("retrieval_sum") / grid("retrieval_n")
    k = params.reliability_k or int(repeats[present].min() if present.any() else 1)
    reliability = np.where(present, pass_hat_k(correct, repeats, k), np.nan)
    alpha = params.alpha
    method = params.interval_method

    refusals = check_refusals(
        family=family,
        tasks=tasks,
        strata=strata,
        repeats=repeats,
        theta=params.threshold,
        alpha=alpha,
        interval_method=method,
        min_repeats=params.min_repeats,
    )
    inputs, outputs = grid("input_tokens"), grid("output_tokens")
    model_calls, tool_calls = grid("model_calls"), grid("tool_calls")
    costs, latency = grid("cost"), grid("latency_ms")
    cost_sums, cost_n = grid("cost_sum"), grid("cost_n")

    stratum_results = []
    for j, tokens in enumerate(strata):
        here = present[:, j]
        accuracy = task_clustered_interval(rates[here, j], alpha=alpha, method=method)
        rel = task_clustered_interval(reliability[here, j], alpha=alpha, method=method)
        retrieval = task_clustered_interval(retrieval_rates[here, j], alpha=alpha, method=method)
        input_ci = mean_t_interval(inputs[here, j], alpha=alpha)
        cost_ci = mean_t_interval(costs[here, j], alpha=alpha)
        successes = float((correct[here, j]).sum())
        has_cost = bool(np.nansum(cost_n[here, j]) > 0)
        stratum_results.append(
            StratumResult(
                tokens=tokens,
                tasks=int(here.sum()),
                repeats=int(repeats[here, j].min()) if here.any() else 0,
                repeats_max=int(repeats[here, j].max()) if here.any() else 0,
                trials=int(repeats[here, j].sum()),
                accuracy=accuracy.mean,
                ci=_interval(accuracy),
                lower_bound=accuracy.low,
                passes=accuracy.low is not None and accuracy.low >= params.threshold,
                accuracy_method=accuracy.method,
                reliability=rel.mean,
                reliability_ci=_interval(rel),
                retrieval=retrieval.mean,
                retrieval_ci=_interval(retrieval),
                retrieval_tasks=retrieval.n,
                input_tokens=input_ci.mean,
                input_tokens_ci=_interval(input_ci),
                output_tokens=_nan_to_none(np.nanmean(outputs[here, j])) if here.any() else None,
                model_calls=_nan_to_none(np.nanmean(model_calls[here, j]))
                if here.any() and not np.isnan(model_calls[here, j]).all()
                else None,
                tool_calls=_nan_to_none(np.nanmean(tool_calls[here, j]))
                if here.any() and not np.isnan(tool_calls[here, j]).all()
                else None,
                cost=cost_ci.mean,
                cost_ci=_interval(cost_ci),
                cost_per_success=(float(np.nansum(cost_sums[here, j])) / successes)
                if has_cost and successes
                else None,
                latency_ms=_nan_to_none(np.nanmean(latency[here, j]))
                if here.any() and not np.isnan(latency[here, j]).all()
                else None,
            )
        )

    refused = bool(refusals)
    paired = not any(r.rule == RULE_UNPAIRED for r in refusals) and bool(strata)
    accuracy_curve = [s.accuracy for s in stratum_results]
    point = ecl_mod.fixed_sequence_ecl(
        strata, [s.lower_bound for s in stratum_results], params.threshold
    )
    rel_threshold = params.reliability_threshold or params.threshold
    rel_point = ecl_mod.fixed_sequence_ecl(
        strata, [s.reliability_ci[0] for s in stratum_results], rel_threshold
    )

    uncertainty = knee = saturation = hinge = gee = None
    kneedle_knee = kneedle_sat = None
    kneedle_note = ""
    if paired:
        weights = ecl_mod.bootstrap_weights(
            len(tasks), params.bootstrap_replicates, _family_rng(params, family)
        )
        replicate_means = ecl_mod.bootstrap_means(rates, weights)
        confidences = sorted({0.95, params.lower_ecl_confidence})
        uncertainty = ecl_mod.ecl_uncertainty(
            strata,
            rates,
            replicate_means,
            params.threshold,
            confidences=confidences,
            method=method,
        )
        knee = paired_drop_knee(
            strata,
            rates,
            replicate_means,
            delta=params.knee_delta,
            confidence=params.knee_confidence,
        )
        saturation = saturation_point(
            strata,
            rates,
            replicate_means,
            epsilon=params.saturation_epsilon,
            confidence=params.saturation_confidence,
        )
        hinge = hinge_fit(strata, accuracy_curve, [s.tasks for s in stratum_results])
        knee_check = kneedle_crosscheck(
            strata,
            accuracy_curve,
            direction="decreasing",
            sensitivity=params.kneedle_sensitivity,
            min_strata=params.kneedle_min_strata,
            min_change=params.knee_delta,
        )
        sat_check = kneedle_crosscheck(
            strata,
            accuracy_curve,
            direction="increasing",
            sensitivity=params.kneedle_sensitivity,
            min_strata=params.kneedle_min_strata,
            min_change=params.saturation_epsilon,
        )
        kneedle_knee, kneedle_sat = knee_check.tokens, sat_check.tokens
        kneedle_note = knee_check.note or sat_check.note
        trial_rows = frame.sort_values(["task", "stratum", "repeat"])
        gee = ecl_mod.gee_crosscheck(
            trial_rows["task_correct"].to_numpy(dtype=float),
            np.log2(trial_rows["stratum"].to_numpy(dtype=float)),
            trial_rows["task"].astype(str).to_numpy(),
            theta=params.threshold,
            confidence=params.gee_confidence,
            cap_tokens=point.tokens,
        )

    if refused:
        ecl_tokens, ecl_status = None, ecl_mod.ECL_REFUSED
        lower95 = lower = None
        interval = [None, None]
        prob = uncertainty.prob_at_least if uncertainty else None
    else:
        ecl_tokens, ecl_status = point.tokens, point.status
        lower95 = uncertainty.lower_tokens.get("0.95")
        lower = uncertainty.lower_tokens.get(f"{params.lower_ecl_confidence:g}")
        interval = list(uncertainty.interval_tokens)
        prob = uncertainty.prob_at_least
    curve = [a for a in accuracy_curve if a is not None]
    ruler = asdict(ruler_weighted_averages(curve)) if curve else None
    return FamilyResult(
        family=family,
        tasks=len(tasks),
        trials=int(repeats.sum()),
        strata=stratum_results,
        refusals=refusals,
        ecl_tokens=ecl_tokens,
        ecl_status=ecl_status,
        ecl_text=ecl_text(ecl_tokens, ecl_status, strata),
        ecl_lower95_tokens=lower95,
        ecl_lower_tokens=lower,
        ecl_lower_confidence=params.lower_ecl_confidence,
        ecl_interval_tokens=interval,
        p_ecl_at_least=prob,
        knee_tokens=knee.tokens if knee else None,
        knee=asdict(knee) if knee else None,
        saturation_tokens=saturation.tokens if saturation else None,
        saturation=asdict(saturation) if saturation else None,
        hinge=asdict(hinge) if hinge else None,
        kneedle_knee_tokens=kneedle_knee,
        kneedle_saturation_tokens=kneedle_sat,
        kneedle_note=kneedle_note,
        gee=asdict(gee) if gee else None,
        ruler=ruler,
        reliability_k=k,
        reliability_ecl_tokens=None if refused else rel_point.tokens,
        reliability_ecl_status=ecl_mod.ECL_REFUSED if refused else rel_point.status,
    )


def trials_frame(rows) -> pd.DataFrame:
    """A trial table from dicts or tuples in COLUMNS order, with the dtypes analysis expects."""
    frame = (
        pd.DataFrame.from_records(rows, columns=COLUMNS) if rows else pd.DataFrame(columns=COLUMNS)
    )
    for column in ("task_correct", "retrieval_correct", "input_tokens", "output_tokens",
                   "model_calls", "tool_calls", "cost", "latency_ms"):  # fmt: skip
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    frame["stratum"] = frame["stratum"].astype("int64")
    frame["family"] = frame["family"].astype(str)
    frame["task"] = frame["task"].astype(str)
    return frame


METHOD_NOTES = {
    "accuracy": "Per-stratum accuracy is the mean of per-task pass rates; its interval is "
    "Korn–Graubard's: Clopper–Pearson on the effective number of tasks p̂(1 − p̂)/var̂(p̂), "
    "df-adjusted (two-sided at 1 − 2α, so its lower edge is the one-sided bound), capped by the "
    "binomial bound for n tasks all passing, and the binomial bound over tasks when every task "
    "has the same rate.",
    "ecl": "ECL: fixed-sequence rule — test LCB ≥ θ from the smallest stratum up at the full α "
    "and stop at the first failure.",
    "ecl_uncertainty": "Task bootstrap (tasks resampled with replacement, strata kept paired), "
    "non-increasing isotonic fit per replicate; P(ECL ≥ L) is the share of replicates whose fit "
    "clears θ at L. The lower ECL at confidence c is the smaller of the bootstrap's (largest L "
    "with P ≥ c) and the fixed-sequence ECL at α = 1 − c.",
    "knee": "Paired-drop test: the first stratum after the isotonic plateau whose paired drop is "
    "≥ δ_knee and whose one-sided bootstrap bound excludes 0; the knee is the stratum before it. "
    "Hinge fit (WLS on log2 tokens, BIC against a line) and Kneedle (gated) are cross-checks.",
    "saturation": "Smallest stratum after which no later stratum's paired gain has an upper "
    "bound ≥ ε.",
    "reliability": "pass^k: the unbiased per-task estimate C(c, k)/C(R, k), averaged over tasks.",
    "limit": "Weakest family's min(knee, lower ECL at the consequence's confidence) × the "
    "consequence margin, rounded down to a tested stratum; never above a stratum that passed.",
}


def analyse_sweep(
    frame: pd.DataFrame,
    params: AnalysisParams,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> SweepResult:
    """Analyse every family, then all tasks pooled, then propose a production limit."""
    params.validate()
    families = sorted(frame["family"].unique()) if len(frame) else []
    strata = sorted(int(s) for s in frame["stratum"].unique()) if len(frame) else []
    total_steps = len(families) + 1
    results = []
    for done, family in enumerate(families):
        results.append(analyse_family(family, frame[frame["family"] == family], params))
        if progress:
            progress(done + 1, total_steps, family)
    overall = None
    if families:
        pooled = frame.assign(task=frame["family"] + "/" + frame["task"])
        overall = analyse_family(OVERALL, pooled, params)
    if progress:
        progress(total_steps, total_steps, OVERALL)

    limit_families = set(params.limit_families) if params.limit_families else set(families)
    bases = [
        FamilyBasis(
            family=r.family,
            ecl_tokens=r.ecl_tokens,
            ecl_status=r.ecl_status,
            lower_ecl_tokens=r.ecl_lower_tokens,
            knee_tokens=r.knee_tokens,
            refused=bool(r.refusals),
            lower_bounds={s.tokens: s.lower_bound for s in r.strata},
        )
        for r in results
        if r.family in limit_families
    ]
    proposal = propose_limit(
        bases,
        strata,
        consequence=params.consequence,
        margin_factor=params.margin_factor,
        confidence=params.lower_ecl_confidence,
    )
    reasons = [refusal for r in results for refusal in r.refusals]
    if not families:
        reasons = check_refusals(
            family="sweep", tasks=[], strata=[], repeats=np.zeros((0, 0)), theta=params.threshold,
            alpha=params.alpha, interval_method=params.interval_method,
            min_repeats=params.min_repeats,
        )  # fmt: skip
    blocking = [r for r in reasons if r.family in limit_families or not families]
    return SweepResult(
        status="insufficient" if blocking else "ok",
        reasons=reasons,
        families=results,
        overall=overall,
        weakest_family=proposal.weakest_family,
        proposed_limit_tokens=proposal.tokens,
        proposal=asdict(proposal),
        strata=strata,
        trials=len(frame),
        params=params.as_dict(),
        methods=METHOD_NOTES,
        weakest_family_reason=proposal.weakest_reason,
    )


__all__ = [
    "MIN_REPEATS_FLOOR",
    "OVERALL",
    "RULE_MIN_REPEATS",
    "RULE_MIN_TASKS",
    "RULE_UNPAIRED",
    "AnalysisParams",
    "FamilyResult",
    "StratumResult",
    "SweepResult",
    "analyse_family",
    "analyse_sweep",
    "trials_frame",
]


def _shift(old: int | None, new: int | None) -> float | None:
    if not old or not new:
        return None
    return math.log2(new / old)


def requalification_shifts(current: dict, previous: dict) -> list[dict]:
    """Per family, how the ECL and knee moved from the superseded qualification to this one.

    Shifts are in doublings (log2 new/old); None where either side has no value.
    """
    old = {f["family"]: f for f in previous["families"]}
    shifts = []
    for family in current["families"]:
        before = old.get(family["family"])
        if before is None:
            shifts.append({"family": family["family"], "new_family": True})
            continue
        shifts.append(
            {
                "family": family["family"],
                "new_family": False,
                "ecl_before": before["ecl_text"],
                "ecl_after": family["ecl_text"],
                "ecl_shift_doublings": _shift(before["ecl_tokens"], family["ecl_tokens"]),
                "ecl_lower95_before": before["ecl_lower95_tokens"],
                "ecl_lower95_after": family["ecl_lower95_tokens"],
                "knee_before": before["knee_tokens"],
                "knee_after": family["knee_tokens"],
                "knee_shift_doublings": _shift(before["knee_tokens"], family["knee_tokens"]),
            }
        )
    return shifts
