"""Compaction statistics and the measured cycle parameters S, D, SUMM and P, each with a
bootstrap interval (seed 001 §5.1 and Appendix B). Pure: no Django.

* S    — median post-compaction context;
* SUMM — median compaction summary size;
* P    — per compaction: the context ingested over the (up to) 25 steps after it, in
         excess of the agent's own median growth per step, in step-equivalents
         (Σ growth / median growth − steps); the median over compactions;
* D    — median growth per step in the upper bands (context before the step ≥ `upper_from`).

S, SUMM and P are resampled over compactions, D over runs; one joint replicate of all
four gives one T*, so the percentile interval of T* carries the uncertainty of all four.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from traces.analysis.costs import CallColumns, agent_starts, step_deltas
from traces.analysis.cycle import CycleInputError, CycleParams, optimum

MIN_COMPACTIONS = 10
PENALTY_WINDOW = 25
# Seed 001 §4.2: context added per step is "a stable 1,470 tokens above 200k" (3,200 below 50k).
UPPER_FROM = 200_000
# Replicates: BOOTSTRAP, fewer when the (replicates × compactions) resampling matrix would
# exceed BOOTSTRAP_CELLS, never under BOOTSTRAP_MIN; D resamples whole runs, which is
# slower, so it draws at most D_BOOTSTRAP replicates and reuses them in turn.
BOOTSTRAP = 1000
BOOTSTRAP_CELLS = 4_000_000
BOOTSTRAP_MIN = 200
D_BOOTSTRAP = 300


def bootstrap_replicates(requested: int, compactions: int) -> int:
    if not compactions:
        return requested
    return int(max(BOOTSTRAP_MIN, min(requested, BOOTSTRAP_CELLS // compactions)))


def bootstrap_rule(requested: int = BOOTSTRAP) -> str:
    return (
        f"{requested:,} replicates up to {BOOTSTRAP_CELLS // requested:,} compactions, "
        f"then {BOOTSTRAP_CELLS:,} ÷ compactions, never under {BOOTSTRAP_MIN}; "
        f"D resamples runs with at most {D_BOOTSTRAP} replicates, reused in turn"
    )


@dataclass
class CompactionColumns:
    agent: np.ndarray  # int64
    after_position: np.ndarray  # int64 index (in CallColumns) of the first call after, or -1
    pre: np.ndarray  # float64, NaN when unknown
    post: np.ndarray
    summary: np.ndarray
    duration_ms: np.ndarray
    task_type: np.ndarray  # object (str) task type of the run that ended at the compaction

    def __len__(self) -> int:
        return len(self.agent)

    def subset(self, mask: np.ndarray) -> CompactionColumns:
        return CompactionColumns(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def _median_or_none(values: np.ndarray) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else None


@dataclass
class CompactionSummary:
    """`median_preserved` is seed 001's "fraction of window preserved": per compaction,
    summary ÷ pre-compaction window (the seed's medians give 4,382 ÷ 574,875 ≈ 0.8%).
    `median_post_share` is post ÷ pre: what the next call actually carries, the summary
    plus whatever the harness re-sends (system prompt, tools, re-attached files)."""

    count: int
    median_pre: float | None
    median_post: float | None
    median_summary: float | None
    median_preserved: float | None
    median_post_share: float | None
    median_duration_ms: float | None
    n_pre: int
    n_post: int
    n_summary: int
    n_preserved: int
    n_post_share: int
    n_duration: int
    pre: list[float] = field(default_factory=list)
    post: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Per-compaction ratio; NaN where either side is unknown or the window was empty."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def compaction_summary(comp: CompactionColumns) -> CompactionSummary:
    preserved = _ratio(comp.summary, comp.pre)
    post_share = _ratio(comp.post, comp.pre)
    return CompactionSummary(
        count=len(comp),
        median_pre=_median_or_none(comp.pre),
        median_post=_median_or_none(comp.post),
        median_summary=_median_or_none(comp.summary),
        median_preserved=_median_or_none(preserved),
        median_post_share=_median_or_none(post_share),
        median_duration_ms=_median_or_none(comp.duration_ms),
        n_pre=int(np.isfinite(comp.pre).sum()),
        n_post=int(np.isfinite(comp.post).sum()),
        n_summary=int(np.isfinite(comp.summary).sum()),
        n_preserved=int(np.isfinite(preserved).sum()),
        n_post_share=int(np.isfinite(post_share).sum()),
        n_duration=int(np.isfinite(comp.duration_ms).sum()),
        pre=[float(v) for v in comp.pre if np.isfinite(v)],
        post=[float(v) for v in comp.post if np.isfinite(v)],
    )


def penalty_per_compaction(
    cols: CallColumns, comp: CompactionColumns, window: int = PENALTY_WINDOW
) -> np.ndarray:
    """Excess ingestion after each compaction, in step-equivalents (NaN when unmeasurable)."""
    result = np.full(len(comp), np.nan)
    if len(cols) < 2 or len(comp) == 0:
        return result
    starts = agent_starts(cols.agent)
    ends = np.r_[starts[1:], len(cols)]
    agent_of_start = cols.agent[starts]
    growth = np.r_[np.nan, np.diff(cols.context).astype(np.float64)]
    growth[starts] = np.nan
    same_run = np.r_[False, cols.run[1:] == cols.run[:-1]]
    growth[~same_run] = np.nan  # no growth across a boundary
    positive = np.isfinite(growth) & (growth > 0)
    frame = pd.DataFrame({"agent": cols.agent[positive], "growth": growth[positive]}).groupby(
        "agent"
    )["growth"]
    medians = frame.median().where(frame.size() >= 5)
    agent_median = medians.to_dict()
    agent_end = dict(zip(agent_of_start.tolist(), ends.tolist(), strict=True))
    for i in range(len(comp)):
        landing = int(comp.after_position[i])
        if landing < 0:
            continue
        typical = agent_median.get(int(comp.agent[i]), np.nan)
        if not np.isfinite(typical) or typical <= 0:
            continue
        # The first step after the compaction ingests (landing context − post size) when the
        # harness records the post size apart from the landing call; then the next steps.
        first = []
        post = comp.post[i]
        if np.isfinite(post) and cols.context[landing] > post:
            first = [float(cols.context[landing] - post)]
        stop = min(landing + 1 + window - len(first), agent_end[int(comp.agent[i])])
        steps = growth[landing + 1 : stop]
        steps = np.r_[first, steps[np.isfinite(steps)]]
        if len(steps) < window // 2:
            continue  # the agent stopped too soon after compacting to measure
        result[i] = float(steps.sum() / typical - len(steps))
    return result


@dataclass
class Parameter:
    name: str
    value: float | None
    ci: tuple[float, float] | None
    n: int
    unit: str
    method: str


@dataclass
class CycleParameters:
    post_compaction: Parameter
    growth_per_step: Parameter
    summary: Parameter
    penalty_steps: Parameter
    compactions: int
    optimum_threshold: float | None
    optimum_ci: tuple[float, float] | None
    penalty_optimum_ci: tuple[float, float] | None
    bootstrap: int
    reasons: list[str] = field(default_factory=list)
    bootstrap_d: int = 0
    bootstrap_rule: str = ""
    replicates: list[tuple[float, float, float, float]] = field(default_factory=list, repr=False)
    growth_from_tokens: int = UPPER_FROM  # D is measured on steps starting at this context

    @property
    def usable(self) -> bool:
        return not self.reasons

    def params(self) -> CycleParams | None:
        if not self.usable:
            return None
        return CycleParams(
            self.post_compaction.value,
            self.growth_per_step.value,
            self.summary.value,
            self.penalty_steps.value,
        )

    def as_dict(self) -> dict:
        data = asdict(self)
        data.pop("replicates")
        data["usable"] = self.usable
        return data


def _percentile_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    values = values[np.isfinite(values)]
    if len(values) < 20:
        return None
    tail = (1 - level) / 2 * 100
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def _resampled_medians(values: np.ndarray, idx: np.ndarray, rows: int = 25) -> np.ndarray:
    """nanmedian of `values[idx]` per replicate (row of `idx`), a few rows at a time: the
    resampled matrix is never held whole (it is as large as `idx`, up to 32 MB)."""
    return np.concatenate(
        [np.nanmedian(values[idx[i : i + rows]], axis=1) for i in range(0, len(idx), rows)]
    )


def _bootstrap_median(values: np.ndarray, rng: np.random.Generator, b: int) -> np.ndarray:
    """Medians of b resamples, computed as one matrix (vectorised)."""
    if len(values) == 0:
        return np.full(b, np.nan)
    idx = rng.integers(0, len(values), size=(b, len(values)))
    return np.median(values[idx], axis=1)


def _bootstrap_grouped_median(
    values: np.ndarray, groups: np.ndarray, rng: np.random.Generator, b: int, cap: int = 200_000
) -> np.ndarray:
    """Medians over resampled groups (runs), keeping each group's values together."""
    if len(values) == 0:
        return np.full(b, np.nan)
    order = np.argsort(groups, kind="stable")
    values, groups = values[order], groups[order]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    sizes = np.diff(np.r_[starts, len(values)])
    out = np.empty(b)
    for i in range(b):
        chosen = rng.integers(0, len(starts), size=len(starts))
        lengths = sizes[chosen]
        total = int(lengths.sum())
        if total > cap:  # subsample long replicates; the median is stable at this size
            keep = rng.integers(0, total, size=cap)
        else:
            keep = None
        index = np.repeat(starts[chosen] - np.cumsum(np.r_[0, lengths[:-1]]), lengths) + np.arange(
            total
        )
        sample = values[index] if keep is None else values[index[keep]]
        out[i] = np.median(sample)
    return out


def _unmeasurable(result: CycleParameters, upper_from: int) -> list[str]:
    """Why measured values the model cannot take are refused: a median P below zero (the
    calls after a compaction took in less than the agent's usual growth), D or S not
    above zero, or any value beyond the model's bounds."""
    reasons = []
    p, d, s = result.penalty_steps, result.growth_per_step, result.post_compaction
    if p.value is not None and p.value < 0 and p.n >= MIN_COMPACTIONS:
        reasons.append(
            "P is not measurable: no excess ingestion after compactions (the median over "
            f"{p.n:,} compactions is {p.value:,.1f} steps: the steps after a compaction took "
            "in less context than the agent's usual growth)."
        )
    if d.value is not None and d.value <= 0 and d.n >= 50:
        reasons.append(
            f"D is not measurable: context does not grow from {upper_from:,} tokens up "
            f"(median {d.value:,.0f} tokens per step over {d.n:,} steps)."
        )
    if s.value is not None and s.value <= 0:
        reasons.append("S is not measurable: no compaction records a context after it.")
    if reasons or result.reasons or any(v.value is None for v in (p, d, s, result.summary)):
        return reasons
    try:
        CycleParams(s.value, d.value, result.summary.value, p.value).validate()
    except CycleInputError as exc:
        reasons.append(f"The measured values are outside the cycle model's range: {exc}")
    return reasons


def cycle_parameters(
    cols: CallColumns,
    comp: CompactionColumns,
    *,
    upper_from: int = UPPER_FROM,
    window: int = PENALTY_WINDOW,
    bootstrap: int = BOOTSTRAP,
    seed: int = 2026,
    min_compactions: int = MIN_COMPACTIONS,
    growth_cols: CallColumns | None = None,
    penalties: np.ndarray | None = None,
) -> CycleParameters:
    """`growth_cols`, when given, is the subset of calls D is measured on (a task type's);
    `penalties`, when given, are the precomputed P of each compaction in `comp`.

    The bootstrap keeps its resampling matrices near 4M cells: with many compactions it
    uses fewer replicates (never under 200); the count used and the rule are reported."""
    rng = np.random.default_rng(seed)
    if penalties is None:
        penalties = penalty_per_compaction(cols, comp, window)
    requested = bootstrap
    bootstrap = bootstrap_replicates(requested, len(comp))
    post, summary = comp.post, comp.summary
    before, growth, runs = step_deltas(growth_cols if growth_cols is not None else cols)
    upper = before >= upper_from
    d_values, d_runs = growth[upper], runs[upper]
    reasons = []
    usable_p = penalties[np.isfinite(penalties)]
    if len(comp) < min_compactions:
        reasons.append(
            f"Only {len(comp)} compactions (fewer than {min_compactions}): P, S and SUMM cannot be estimated."
        )
    elif len(usable_p) < min_compactions:
        reasons.append(
            f"Only {len(usable_p)} compactions are followed by enough steps to measure P (need {min_compactions})."
        )
    if len(d_values) < 50:
        reasons.append(
            f"Only {len(d_values)} steps start above {upper_from:,} tokens: D cannot be estimated (need 50)."
        )
    if not np.isfinite(summary).any() and not reasons:
        reasons.append("No compaction records its summary size: SUMM cannot be estimated.")

    def parameter(name, values, ci_values, unit, method):
        finite = values[np.isfinite(values)]
        return Parameter(
            name,
            float(np.median(finite)) if len(finite) else None,
            _percentile_ci(ci_values),
            len(finite),
            unit,
            method,
        )

    b = bootstrap
    idx = rng.integers(0, max(len(comp), 1), size=(b, max(len(comp), 1))) if len(comp) else None
    # A replicate may draw only compactions without a value (NaN); its median is NaN and
    # is dropped from the interval, so numpy's "All-NaN slice" warning is expected here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        s_reps = _resampled_medians(post, idx) if idx is not None else np.full(b, np.nan)
        summ_reps = (
            _resampled_medians(summary, idx)
            if idx is not None and np.isfinite(summary).any()
            else np.full(b, np.nan)
        )
        p_reps = (
            _resampled_medians(penalties, idx)
            if idx is not None and len(usable_p)
            else np.full(b, np.nan)
        )
    b_d = min(b, D_BOOTSTRAP)
    d_reps = (
        _bootstrap_grouped_median(d_values, d_runs, rng, b_d)
        if len(d_values)
        else np.full(b_d, np.nan)
    )
    d_reps = np.resize(d_reps, b)
    result = CycleParameters(
        post_compaction=parameter(
            "S",
            post,
            s_reps,
            "tokens",
            "median post-compaction context; bootstrap over compactions",
        ),
        growth_per_step=parameter(
            "D",
            d_values,
            d_reps,
            "tokens/step",
            f"median context added per step from {upper_from:,} tokens up; bootstrap over runs",
        ),
        summary=parameter(
            "SUMM", summary, summ_reps, "tokens", "median summary size; bootstrap over compactions"
        ),
        penalty_steps=parameter(
            "P",
            penalties,
            p_reps,
            "steps",
            f"median excess ingestion over the {window} steps after a compaction, vs the agent's own median growth; bootstrap over compactions",
        ),
        compactions=len(comp),
        optimum_threshold=None,
        optimum_ci=None,
        penalty_optimum_ci=None,
        bootstrap=b,
        reasons=reasons,
        bootstrap_d=b_d,
        bootstrap_rule=bootstrap_rule(requested),
        growth_from_tokens=int(upper_from),
    )
    result.reasons.extend(_unmeasurable(result, upper_from))
    if result.usable:
        params = result.params()
        result.optimum_threshold = optimum(params)
        replicates = [
            (s, d, m, p)
            for s, d, m, p in zip(s_reps, d_reps, summ_reps, p_reps, strict=True)
            if np.isfinite([s, d, m, p]).all() and d > 0 and p >= 0
        ]
        result.replicates = replicates
        stars = np.array([optimum(CycleParams(*r)) for r in replicates])
        result.optimum_ci = _percentile_ci(stars)
        if result.penalty_steps.ci:
            lo, hi = result.penalty_steps.ci
            result.penalty_optimum_ci = (
                optimum(
                    CycleParams(
                        params.post_compaction, params.growth_per_step, params.summary, max(lo, 0.0)
                    )
                ),
                optimum(
                    CycleParams(
                        params.post_compaction, params.growth_per_step, params.summary, max(hi, 0.0)
                    )
                ),
            )
    return result
