"""Where decline begins: the paired-drop test (primary), a hinge fit by WLS with BIC against a
line (secondary), and Kneedle as a gated cross-check only (METHODS.md §3).

With repeats, the paired one-sided bound on a drop comes from the paired cluster bootstrap
over tasks: every replicate keeps a task's results at all strata together.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from qualification.analysis.ecl import isotonic_point_fit


@dataclass(frozen=True)
class DropTest:
    tokens: int
    drop: float  # plateau minus accuracy here, paired over tasks
    lower_bound: float  # one-sided bound on the drop at the knee confidence
    significant: bool  # drop ≥ δ_knee and the bound excludes 0


@dataclass(frozen=True)
class KneeResult:
    tokens: int | None  # the last stable stratum before decline; None: no decline in range
    decline_starts_tokens: int | None
    plateau_tokens: list[int]
    plateau_level: float | None
    tests: list[DropTest]
    # Share of bootstrap replicates per knee, ascending by stratum: {"32000": .7, "none": .1}
    distribution: dict[str, float] = field(default_factory=dict)
    note: str = ""


def paired_drop_knee(
    strata,
    task_rates: np.ndarray,
    replicate_means: np.ndarray,
    *,
    delta: float = 0.05,
    confidence: float = 0.95,
) -> KneeResult:
    """The knee is the stratum just before the first significant paired drop from the plateau.

    Plateau: the strata pooled into the isotonic fit's maximum. Decline starts at the first
    later stratum whose mean paired drop is at least δ and whose one-sided bootstrap bound
    excludes 0. The knee's uncertainty: the same rule (point version) in every replicate.
    """
    strata = [int(s) for s in strata]
    means = task_rates.mean(axis=0)
    fitted = isotonic_point_fit(means)
    plateau = [j for j in range(len(strata)) if abs(fitted[j] - fitted[0]) < 1e-9]
    block = plateau[-1] + 1
    ref_task = task_rates[:, plateau].mean(axis=1)
    ref_boot = replicate_means[:, plateau].mean(axis=1)
    tests: list[DropTest] = []
    decline = None
    for j in range(block, len(strata)):
        drop = float((ref_task - task_rates[:, j]).mean())
        boot = ref_boot - replicate_means[:, j]
        bound = float(np.quantile(boot, 1 - confidence, method="inverted_cdf"))
        significant = drop >= delta - 1e-12 and bound > 0
        tests.append(DropTest(strata[j], drop, bound, significant))
        if significant and decline is None:
            decline = j
    # Knee in each replicate: the point rule (drop ≥ δ) against that replicate's plateau level.
    boot_drops = ref_boot[:, None] - replicate_means[:, block:]
    hits = boot_drops >= delta - 1e-12
    distribution: dict[str, float] = {}
    if hits.shape[1]:
        first = np.where(hits.any(axis=1), hits.argmax(axis=1) + block, -1)
        for j in range(block, len(strata)):
            share = float((first == j).mean())
            if share >= 0.005:
                distribution[str(strata[j - 1])] = share
        none_share = float((first == -1).mean())
        if none_share >= 0.005:
            distribution["none"] = none_share
    else:
        distribution["none"] = 1.0
    note = (
        "no significant drop within the tested range"
        if decline is None
        else f"decline from {strata[decline]:,} tokens"
    )
    return KneeResult(
        tokens=strata[decline - 1] if decline is not None else None,
        decline_starts_tokens=strata[decline] if decline is not None else None,
        plateau_tokens=[strata[j] for j in plateau],
        plateau_level=float(fitted[0]),
        tests=tests,
        distribution=distribution,
        note=note,
    )


@dataclass(frozen=True)
class HingeFit:
    """y = a + b·min(0, k − x) on x = log2(tokens), k at a tested stratum, WLS on task counts."""

    breakpoint_tokens: int | None
    plateau: float | None
    slope_per_doubling: float | None  # change in accuracy per doubling after the breakpoint
    bic_hinge: float | None
    bic_line: float | None
    preferred: str  # "hinge", "line" or "" when too few strata
    note: str = ""


def _bic(rss: float, n: int, params: int) -> float:
    return n * math.log(max(rss / n, 1e-12)) + params * math.log(n)


def hinge_fit(strata, accuracy, weights) -> HingeFit:
    """Best breakpoint by weighted residual sum of squares; BIC counts k as a parameter."""
    import statsmodels.api as sm

    x = np.log2(np.asarray(strata, dtype=float))
    y = np.asarray(accuracy, dtype=float)
    w = np.asarray(weights, dtype=float)
    n = x.size
    if n < 3:
        return HingeFit(None, None, None, None, None, "", "needs at least three strata")
    best = None
    for k in x[:-1]:
        design = np.column_stack([np.ones(n), np.minimum(0.0, k - x)])
        fit = sm.WLS(y, design, weights=w).fit()
        if best is None or fit.ssr < best[1].ssr - 1e-15:
            best = (k, fit)
    k, fit = best
    line = sm.WLS(y, sm.add_constant(x), weights=w).fit()
    # Residuals are scaled to unit mean weight so both BICs share one likelihood scale.
    scale = w.mean()
    bic_hinge = _bic(fit.ssr / scale, n, 3)
    bic_line = _bic(line.ssr / scale, n, 2)
    return HingeFit(
        breakpoint_tokens=round(2**k),
        plateau=float(fit.params[0]),
        slope_per_doubling=float(-fit.params[1]),
        bic_hinge=bic_hinge,
        bic_line=bic_line,
        preferred="hinge" if bic_hinge < bic_line else "line",
    )


@dataclass(frozen=True)
class KneedleCheck:
    tokens: int | None
    ran: bool
    note: str


def kneedle_crosscheck(
    strata,
    values,
    *,
    direction: str,
    sensitivity: float = 1.0,
    min_strata: int = 5,
    min_change: float = 0.05,
) -> KneedleCheck:
    """Kneedle on x = log2(tokens), concave shape, only where it is known to behave."""
    from kneed import KneeLocator

    y = np.asarray(values, dtype=float)
    if len(strata) < min_strata:
        return KneedleCheck(None, False, f"not run: fewer than {min_strata} strata")
    change = float(y.max() - y.min())
    if change < min_change:
        return KneedleCheck(
            None, False, f"not run: total change {change:.3f} is below {min_change:.3f}"
        )
    x = np.log2(np.asarray(strata, dtype=float))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        locator = KneeLocator(
            x,
            y,
            S=sensitivity,
            curve="concave",
            direction=direction,
            interp_method="interp1d",
            online=False,
        )
    if locator.knee is None:
        return KneedleCheck(None, True, "no knee found")
    return KneedleCheck(round(2 ** float(locator.knee)), True, "")
