"""Paired comparisons of two conditions on the same tasks (METHODS.md §4). No Django.

A paired 2×2 table counts pairs by outcome under each condition:

    both          a  both conditions passed
    with_only     b  only the treatment (e.g. "with the file") passed
    without_only  c  only the control (e.g. "no file") passed
    neither       d  both failed

and the difference of interest is D = (b − c) / n.

Public API (plain numbers in, frozen dataclasses out):

* `PairedTable` and `PairedTable.from_outcomes(pairs)`
* `newcombe_paired_ci(table, confidence)` — Newcombe (1998) method 10, square-and-add with
  Wilson limits. Hand-written: statsmodels has no paired-difference interval. For a
  one-sided (1 − α) bound, take the matching end of the interval at confidence 1 − 2α
  (e.g. the 90% interval's lower end is the one-sided 95% lower bound).
* `mcnemar_test(table)` — exact conditional p (statsmodels) and mid-p (hand-written per
  Fagerland et al. 2013; statsmodels has no mid-p).
* `equivalent_by_inclusion(ci, margin)` — TOST at level α by inclusion of the (1−2α) CI.
* `task_rate_equivalence(...)` — `ttost_paired` on per-task pass rates, guarded against
  zero variance by falling back to Newcombe on a task-level binary.
* `decide(...)` — the pre-registered rule: helps / equivalent / hurts / inconclusive, with
  `within_margin` beside it (a significant difference inside ±Δ stays helps or hurts).
* `compare_paired(table, delta=, margin=)` — all of the above for one table.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy.stats import binom
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import ttost_paired


@dataclass(frozen=True)
class PairedTable:
    both: int
    with_only: int
    without_only: int
    neither: int

    def __post_init__(self):
        for name in ("both", "with_only", "without_only", "neither"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")

    @property
    def n(self) -> int:
        return self.both + self.with_only + self.without_only + self.neither

    @property
    def discordant(self) -> int:
        return self.with_only + self.without_only

    @property
    def difference(self) -> float:
        """D̂ = (b − c) / n: the treatment's success rate minus the control's."""
        return (self.with_only - self.without_only) / self.n if self.n else float("nan")

    @property
    def p_with(self) -> float:
        return (self.both + self.with_only) / self.n if self.n else float("nan")

    @property
    def p_without(self) -> float:
        return (self.both + self.without_only) / self.n if self.n else float("nan")

    @property
    def discordance(self) -> float:
        """ψ̂ = (b + c) / n, the share of pairs whose outcomes differ."""
        return self.discordant / self.n if self.n else float("nan")

    def as_dict(self) -> dict[str, int]:
        return {
            "both": self.both,
            "with_only": self.with_only,
            "without_only": self.without_only,
            "neither": self.neither,
        }

    @classmethod
    def from_outcomes(cls, pairs: Iterable[tuple[bool, bool]]) -> PairedTable:
        """Count (treatment_passed, control_passed) pairs."""
        counts = [0, 0, 0, 0]
        for with_passed, without_passed in pairs:
            counts[(0 if with_passed else 2) + (0 if without_passed else 1)] += 1
        both, with_only, without_only, neither = counts
        return cls(both=both, with_only=with_only, without_only=without_only, neither=neither)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    confidence: float
    method: str

    def as_list(self) -> list[float]:
        return [self.low, self.high]

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


NEWCOMBE_METHOD = "Newcombe (1998) method 10: square-and-add with Wilson limits"


def newcombe_paired_ci(table: PairedTable, confidence: float = 0.95) -> Interval:
    """Newcombe's paired-difference interval for D = p_with − p_without (method 10)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    if table.n == 0:
        raise ValueError("an empty table has no interval")
    low, high = _newcombe_arrays(
        np.array([table.both]),
        np.array([table.with_only]),
        np.array([table.without_only]),
        np.array([table.neither]),
        alpha=1 - confidence,
    )
    return Interval(float(low[0]), float(high[0]), confidence, NEWCOMBE_METHOD)


def _newcombe_arrays(a, b, c, d, *, alpha: float):
    """Vectorised method 10 over arrays of tables (used by the power simulation too)."""
    a, b, c, d = (np.asarray(x, dtype=float) for x in (a, b, c, d))
    n = a + b + c + d
    p1 = (a + b) / n
    p2 = (a + c) / n
    l1, u1 = proportion_confint(a + b, n, alpha=alpha, method="wilson")
    l2, u2 = proportion_confint(a + c, n, alpha=alpha, method="wilson")
    big_a = a * d - b * c
    marginals = (a + b) * (c + d) * (a + c) * (b + d)
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(marginals)
        phi = np.where(
            big_a > n / 2, (big_a - n / 2) / root, np.where(big_a < 0, big_a / root, 0.0)
        )
    phi = np.where(marginals == 0, 0.0, phi)
    diff = p1 - p2
    low = diff - np.sqrt(
        np.maximum((p1 - l1) ** 2 + (u2 - p2) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2), 0.0)
    )
    high = diff + np.sqrt(
        np.maximum((p2 - l2) ** 2 + (u1 - p1) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1), 0.0)
    )
    return np.maximum(low, -1.0), np.minimum(high, 1.0)


@dataclass(frozen=True)
class McNemarResult:
    discordant: int
    exact_p: float
    mid_p: float
    method: str = "McNemar exact conditional test (binomial on b, c) with Fagerland mid-p"


def mcnemar_test(table: PairedTable) -> McNemarResult:
    """Two-sided exact McNemar p and its mid-p. b = c or b + c = 0 gives p = 1."""
    b, c = table.with_only, table.without_only
    m = b + c
    if m == 0:
        return McNemarResult(discordant=0, exact_p=1.0, mid_p=1.0)
    exact = float(mcnemar([[table.both, b], [c, table.neither]], exact=True).pvalue)
    k = min(b, c)
    mid = 2 * (binom.cdf(k, m, 0.5) - 0.5 * binom.pmf(k, m, 0.5))
    return McNemarResult(discordant=m, exact_p=min(exact, 1.0), mid_p=float(min(mid, 1.0)))


def equivalent_by_inclusion(ci: Interval, margin: float) -> bool:
    """TOST (Schuirmann): equivalence at level α iff the (1−2α) CI lies inside (−Δ, +Δ)."""
    if margin <= 0:
        raise ValueError("the equivalence margin must be positive")
    return -margin < ci.low and ci.high < margin


@dataclass(frozen=True)
class TaskRateEquivalence:
    n_tasks: int
    mean_difference: float
    p_value: float
    equivalent: bool
    method: str
    note: str = ""


def task_rate_equivalence(
    rates_with: Sequence[float],
    rates_without: Sequence[float],
    *,
    margin: float,
    alpha: float = 0.05,
) -> TaskRateEquivalence:
    """Paired TOST on per-task pass rates (tasks, not repeats, are the independent unit).

    `ttost_paired` returns a spurious p = 0 when every paired difference is equal (zero
    variance); then this falls back to Newcombe's (1−2α) interval on a task-level binary
    (a task passes when all its repeats passed).
    """
    x1 = np.asarray(rates_with, dtype=float)
    x2 = np.asarray(rates_without, dtype=float)
    if x1.shape != x2.shape or x1.ndim != 1:
        raise ValueError("per-task rates must be two equal-length sequences")
    if len(x1) < 2:
        raise ValueError("at least two tasks are needed")
    diffs = x1 - x2
    mean_difference = float(diffs.mean())
    if np.ptp(diffs) == 0:
        table = PairedTable.from_outcomes(zip(x1 >= 1.0, x2 >= 1.0, strict=True))
        ci = newcombe_paired_ci(table, confidence=1 - 2 * alpha)
        return TaskRateEquivalence(
            n_tasks=len(x1),
            mean_difference=mean_difference,
            p_value=float("nan"),
            equivalent=equivalent_by_inclusion(ci, margin),
            method=f"{NEWCOMBE_METHOD}, on tasks passing every repeat",
            note="Every task's difference is identical (zero variance), so the paired t-test "
            "is undefined; the task-level Newcombe interval decides instead.",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p_value, _, _ = ttost_paired(x1, x2, -margin, margin)
    p_value = float(p_value)
    return TaskRateEquivalence(
        n_tasks=len(x1),
        mean_difference=mean_difference,
        p_value=p_value,
        equivalent=p_value < alpha,
        method="paired TOST on per-task pass rates (statsmodels ttost_paired)",
    )


class Verdict(StrEnum):
    HELPS = "helps"
    EQUIVALENT = "equivalent"
    HURTS = "hurts"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    within_margin: bool = False  # the 90% CI lies inside ±Δ (TOST), whatever the verdict


def decide(*, ci95: Interval, ci90: Interval, delta: float, margin: float) -> Decision:
    """The pre-registered rule; exactly one verdict results.

    helps: 95% lower bound > δ · hurts: 95% upper bound < 0 · equivalent: 90% CI inside ±Δ
    and the 95% CI contains 0 · otherwise inconclusive (never "no effect"). A significant
    difference inside ±Δ keeps its direction (helps or hurts) with `within_margin`: it is
    never reported as just "equivalent".
    """

    def pp(x: float) -> str:
        return f"{100 * x:+.1f} pp".replace("-", "−")

    within = equivalent_by_inclusion(ci90, margin)
    inside = (
        f" The 90% interval ({pp(ci90.low)} to {pp(ci90.high)}) lies within the equivalence "
        f"bound ±{100 * margin:.1f} pp, so the difference is real but small."
        if within
        else ""
    )
    if ci95.low > delta:
        return Decision(
            Verdict.HELPS,
            f"The 95% interval's lower bound ({pp(ci95.low)}) exceeds the decision "
            f"threshold δ = {pp(delta)}.{inside}",
            within,
        )
    if ci95.high < 0:
        return Decision(
            Verdict.HURTS,
            f"The 95% interval's upper bound ({pp(ci95.high)}) is below zero.{inside}",
            within,
        )
    if within and ci95.low > 0:
        return Decision(
            Verdict.HELPS,
            f"The 95% interval ({pp(ci95.low)} to {pp(ci95.high)}) is above zero but does not "
            f"clear δ = {pp(delta)}.{inside}",
            within,
        )
    if within:
        return Decision(
            Verdict.EQUIVALENT,
            f"The 90% interval ({pp(ci90.low)} to {pp(ci90.high)}) lies inside the "
            f"equivalence bound ±{100 * margin:.1f} pp (TOST at α = .05), and the 95% interval "
            "contains zero.",
            within,
        )
    return Decision(
        Verdict.INCONCLUSIVE,
        f"The 95% interval ({pp(ci95.low)} to {pp(ci95.high)}) does not clear δ = {pp(delta)} "
        f"and does not lie below 0, and the 90% interval ({pp(ci90.low)} to {pp(ci90.high)}) "
        f"is not inside ±{100 * margin:.1f} pp. This is not evidence of no effect.",
    )


@dataclass(frozen=True)
class PairedComparison:
    table: PairedTable
    difference: float
    ci95: Interval
    ci90: Interval
    mcnemar: McNemarResult
    equivalent: bool
    decision: Decision
    delta: float
    margin: float

    @property
    def n_pairs(self) -> int:
        return self.table.n

    @property
    def verdict(self) -> Verdict:
        return self.decision.verdict


def compare_paired(table: PairedTable, *, delta: float, margin: float) -> PairedComparison:
    """Difference, both intervals, McNemar, TOST and the verdict for one paired table."""
    if table.n == 0:
        raise ValueError("no pairs to compare")
    if not math.isfinite(delta) or not 0 <= delta < 1:
        # A negative δ would call a file that loses a little "helps".
        raise ValueError("the decision threshold δ must be a difference from 0 up to 1")
    if not 0 < margin < 1:
        raise ValueError("the equivalence bound Δ must be between 0 and 1")
    ci95 = newcombe_paired_ci(table, 0.95)
    ci90 = newcombe_paired_ci(table, 0.90)
    return PairedComparison(
        table=table,
        difference=table.difference,
        ci95=ci95,
        ci90=ci90,
        mcnemar=mcnemar_test(table),
        equivalent=equivalent_by_inclusion(ci90, margin),
        decision=decide(ci95=ci95, ci90=ci90, delta=delta, margin=margin),
        delta=delta,
        margin=margin,
    )
