"""Aggregates of first divergences: which runs count, classes by context band, the context
distribution, and production against the lab's ECL. Pure: plain data in, dataclasses out.

One run contributes one divergence (its *resolved* mark): an admin's adjudication when there
is one; else the only mark; else, when every annotator marked a step within ±N of the others
and chose the same class, the mark at the lower median step; otherwise the run is *disputed*
and left out (and counted) until an admin adjudicates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binom
from statsmodels.stats.proportion import proportion_confint

import numfmt
from traces.annotations.analysis.agreement import DEFAULT_WINDOW, Rating, run_agreement
from traces.annotations.analysis.classes import CLASS_SLUGS

DEFAULT_BAND = 25_000
BAND_CHOICES = (10_000, 25_000, 50_000, 100_000)


@dataclass(frozen=True)
class MarkPoint:
    """One current mark, as the aggregates need it."""

    id: int
    run_id: int
    annotator: int
    step: int
    failure_class: str
    context: int
    model: str
    adjudication: bool = False


@dataclass(frozen=True)
class Resolution:
    resolved: list[MarkPoint]
    disputed_runs: list[int]
    runs: int  # runs with at least one mark
    how: dict[str, int] = field(default_factory=dict)  # adjudicated / single / unanimous


def resolve(marks: Iterable[MarkPoint], *, window: int = DEFAULT_WINDOW) -> Resolution:
    by_run: dict[int, list[MarkPoint]] = {}
    for mark in marks:
        by_run.setdefault(mark.run_id, []).append(mark)
    resolved: list[MarkPoint] = []
    disputed: list[int] = []
    how: Counter = Counter()
    for run_id in sorted(by_run):
        group = by_run[run_id]
        final = [m for m in group if m.adjudication]
        if final:
            resolved.append(final[0])
            how["adjudicated"] += 1
            continue
        if len(group) == 1:
            resolved.append(group[0])
            how["single"] += 1
            continue
        agreement = run_agreement(
            [Rating(m.annotator, m.step, m.failure_class) for m in group], window=window
        )
        if agreement.agrees:
            ordered = sorted(group, key=lambda m: (m.step, m.id))
            resolved.append(ordered[(len(ordered) - 1) // 2])
            how["unanimous"] += 1
        else:
            disputed.append(run_id)
    return Resolution(resolved, disputed, len(by_run), dict(how))


@dataclass(frozen=True)
class Band:
    lower: int
    upper: int
    counts: dict[str, int]

    @property
    def n(self) -> int:
        return sum(self.counts.values())

    @property
    def label(self) -> str:
        return f"{numfmt.tokens(self.lower)}–{numfmt.tokens(self.upper)}"


@dataclass(frozen=True)
class BandTable:
    width: int
    bands: list[Band]
    classes: tuple[str, ...]
    n: int

    def class_totals(self) -> dict[str, int]:
        return {c: sum(b.counts[c] for b in self.bands) for c in self.classes}


def by_band(points: Iterable[tuple[int, str]], *, width: int = DEFAULT_BAND) -> BandTable:
    """Counts of failure classes by context band [k·width, (k+1)·width), empty bands included
    between the smallest and the largest occupied one."""
    if width <= 0:
        raise ValueError("band width must be positive")
    points = list(points)
    occupied = Counter((context // width, cls) for context, cls in points)
    if not points:
        return BandTable(width, [], CLASS_SLUGS, 0)
    first = min(k for k, _ in occupied)
    last = max(k for k, _ in occupied)
    bands = [
        Band(k * width, (k + 1) * width, {c: occupied.get((k, c), 0) for c in CLASS_SLUGS})
        for k in range(first, last + 1)
    ]
    return BandTable(width, bands, CLASS_SLUGS, len(points))


@dataclass(frozen=True)
class Distribution:
    n: int
    minimum: int | None
    p10: float | None
    q1: float | None
    median: float | None
    q3: float | None
    p90: float | None
    maximum: int | None
    median_ci: tuple[int, int] | None  # distribution-free, from order statistics
    median_ci_level: float | None  # its exact coverage (≥ the level asked for)


def median_interval(
    values: Sequence[float], level: float = 0.95
) -> tuple[tuple[float, float], float] | None:
    """Distribution-free interval for the median: order statistics (x(j), x(k)) chosen
    symmetrically so that P(j ≤ B < k) ≥ level with B ~ Binomial(n, ½). None when n is too
    small for that level (n < 6 at 95%)."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        return None
    best = None
    for j in range(n // 2, 0, -1):
        k = n - j + 1  # 1-based ranks j < k, symmetric
        coverage = binom.cdf(k - 1, n, 0.5) - binom.cdf(j - 1, n, 0.5)
        if coverage >= level:
            best = ((data[j - 1], data[k - 1]), float(coverage))
            break
    return best


def distribution(contexts: Sequence[int], level: float = 0.95) -> Distribution:
    if not contexts:
        return Distribution(0, None, None, None, None, None, None, None, None, None)
    values = np.asarray(contexts, dtype=float)
    p10, q1, median, q3, p90 = (float(v) for v in np.percentile(values, [10, 25, 50, 75, 90]))
    interval = median_interval(list(contexts), level)
    return Distribution(
        n=len(contexts),
        minimum=int(values.min()),
        p10=p10,
        q1=q1,
        median=median,
        q3=q3,
        p90=p90,
        maximum=int(values.max()),
        median_ci=(int(interval[0][0]), int(interval[0][1])) if interval else None,
        median_ci_level=interval[1] if interval else None,
    )


EARLIER = "earlier"
INCONCLUSIVE = "inconclusive"
CONSISTENT = "consistent"
INSUFFICIENT = "insufficient"
NO_REFERENCE = "no_reference"


@dataclass(frozen=True)
class LabComparison:
    verdict: str
    statement: str
    reference_kind: str  # "ECL" or "knee" or ""
    reference_tokens: int | None
    family: str | None
    distribution: Distribution
    below_reference: int
    below_share_ci: tuple[float, float] | None


def compare_with_lab(
    contexts: Sequence[int],
    *,
    ecl_tokens: int | None,
    knee_tokens: int | None,
    family: str | None,
    level: float = 0.95,
) -> LabComparison:
    """Does production diverge earlier than the lab predicted?

    The lab predicts that the model stays reliable up to the weakest family's ECL (else its
    knee). Production diverges *earlier* than predicted when the upper end of the
    distribution-free interval for the median context at first divergence is below that
    point; *inconclusive* when the median is below it but the interval reaches it;
    *consistent* when the median is at or beyond it (failures where the lab said reliability
    ends). The share of runs that diverged below it is reported either way.
    """
    dist = distribution(contexts, level)
    kind, reference = ("ECL", ecl_tokens) if ecl_tokens else ("knee", knee_tokens)
    if not reference:
        return LabComparison(
            NO_REFERENCE,
            "The lab found neither an ECL nor a knee for this model's weakest family, so there "
            "is no predicted context to compare with.",
            "",
            None,
            family,
            dist,
            0,
            None,
        )
    n = dist.n
    below = sum(1 for c in contexts if c < reference)
    share_ci = None
    share_text = f"{below} of {n} runs diverged below it"
    if contexts:
        low, high = proportion_confint(below, n, alpha=1 - level, method="wilson")
        share_ci = (float(low), float(high))
        share_text += f" ({below / n:.0%}, {level:.0%} CI {low:.0%}–{high:.0%})"
    ref_text = f"the lab's {kind} of {numfmt.tokens(reference)} ({family})"
    if dist.median_ci is None:
        statement = (
            f"Too few annotated runs (n = {n}) for a {level:.0%} interval of the median; "
            f"{below} of {n} diverged below {ref_text}. Annotate at least 6 runs of this model."
        )
        return LabComparison(
            INSUFFICIENT, statement, kind, reference, family, dist, below, share_ci
        )
    low, high = dist.median_ci
    median_text = (
        f"the median context at first divergence is {numfmt.tokens(dist.median)} "
        f"({dist.median_ci_level:.1%} CI {numfmt.tokens(low)}–{numfmt.tokens(high)}, n = {n} runs)"
    )
    if high < reference:
        verdict = EARLIER
        statement = (
            f"Production diverges earlier than the lab predicted: {median_text}, below "
            f"{ref_text}; {share_text}."
        )
    elif dist.median is not None and dist.median < reference:
        verdict = INCONCLUSIVE
        statement = (
            f"Possibly earlier than the lab predicted, but not conclusively: {median_text}; the "
            f"interval reaches {ref_text}; {share_text}."
        )
    else:
        verdict = CONSISTENT
        statement = (
            f"Consistent with the lab: {median_text}, at or beyond {ref_text}, where the lab "
            f"predicted reliability to fall; {share_text}."
        )
    return LabComparison(verdict, statement, kind, reference, family, dist, below, share_ci)
