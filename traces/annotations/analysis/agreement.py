"""Agreement between annotators: on one run (step within ±N, class) and over a queue (kappa).

Over a queue, each run is an item and each annotator's answer a rating: a failure class, or
"none" when the annotator found no divergence. Cohen's kappa is used when the same two
annotators rated every item; otherwise Fleiss' kappa, which allows different annotators per
item but needs the same number of ratings on each (items with another count are left out and
counted). The statistics come from statsmodels; the bootstrap interval for Fleiss' kappa
(statsmodels gives none) resamples items.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from statsmodels.stats.inter_rater import cohens_kappa, fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

DEFAULT_WINDOW = 3
BOOTSTRAP_REPLICATES = 2000


@dataclass(frozen=True)
class Rating:
    """One annotator's answer on one run: the step (None for "no divergence") and the class."""

    rater: Hashable
    step: int | None
    category: str


@dataclass(frozen=True)
class RunAgreement:
    n: int
    steps: tuple[int, ...]
    step_spread: int | None  # max − min of the marked steps
    same_step: bool
    within_window: bool
    window: int
    class_counts: dict[str, int]
    same_class: bool
    majority_class: str | None  # the class more than half chose, if any

    @property
    def agrees(self) -> bool:
        return self.within_window and self.same_class


def run_agreement(ratings: Sequence[Rating], *, window: int = DEFAULT_WINDOW) -> RunAgreement:
    """Whether the annotators of one run chose the same step (or one within ±window) and class.

    Within ±N for several annotators means every pair is within N steps, i.e. max − min ≤ N.
    A "no divergence" answer has no step; it agrees on the step only with other such answers.
    """
    if window < 0:
        raise ValueError("window must be 0 or more")
    steps = tuple(sorted(r.step for r in ratings if r.step is not None))
    unmarked = sum(1 for r in ratings if r.step is None)
    spread = (steps[-1] - steps[0]) if steps else None
    mixed = bool(steps) and unmarked > 0
    counts = Counter(r.category for r in ratings)
    top, top_n = counts.most_common(1)[0] if counts else (None, 0)
    return RunAgreement(
        n=len(ratings),
        steps=steps,
        step_spread=spread,
        same_step=not mixed and (spread is None or spread == 0),
        within_window=not mixed and (spread is None or spread <= window),
        window=window,
        class_counts=dict(counts),
        same_class=len(counts) <= 1,
        majority_class=top if top_n * 2 > len(ratings) else None,
    )


@dataclass(frozen=True)
class KappaResult:
    method: str  # "cohen", "fleiss" or "" when it cannot be computed
    kappa: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str
    observed_agreement: float | None
    items: int  # items used
    excluded_items: int  # items with another number of ratings (or too few)
    ratings_per_item: int
    raters: int
    categories: tuple[str, ...]
    reason: str = ""  # why kappa is missing, when it is

    @property
    def interpretation(self) -> str:
        return landis_koch(self.kappa)


def landis_koch(kappa: float | None) -> str:
    """Landis & Koch (1977) labels; a convention, not a test."""
    if kappa is None or math.isnan(kappa):
        return ""
    if kappa < 0:
        return "poor"
    for bound, label in ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if kappa <= bound:
            return label
    return "almost perfect"


def _categories(items: Sequence[dict]) -> tuple[str, ...]:
    return tuple(sorted({c for item in items for c in item.values()}))


def kappa_for_items(
    items: Iterable[dict[Hashable, str]],
    *,
    ratings_per_item: int | None = None,
    level: float = 0.95,
    seed: int = 0,
) -> KappaResult:
    """Chance-corrected agreement on categories over items.

    `items` is one dict per item mapping rater → category. `ratings_per_item` is the number
    of ratings an item must have to count (default: the most common count, at least 2).
    """
    items = [dict(item) for item in items]
    counts = Counter(len(item) for item in items if len(item) >= 2)
    if ratings_per_item is None:
        ratings_per_item = max(counts, key=lambda k: (counts[k], k)) if counts else 2
    used = [item for item in items if len(item) == ratings_per_item]
    excluded = len(items) - len(used)
    categories = _categories(used)
    raters = {rater for item in used for rater in item}
    base = {
        "items": len(used),
        "excluded_items": excluded,
        "ratings_per_item": ratings_per_item,
        "raters": len(raters),
        "categories": categories,
    }
    if ratings_per_item < 2 or len(used) < 2:
        return KappaResult(
            "", None, None, None, "", None, **base,
            reason="Kappa needs at least two items each rated by at least two annotators.",
        )  # fmt: skip
    observed = _observed_agreement(used, categories)
    if len(categories) < 2:
        return KappaResult(
            "", None, None, None, "", observed, **base,
            reason="Every rating is in one category, so chance agreement is 100% and kappa is "
            "undefined; observed agreement is complete.",
        )  # fmt: skip
    if ratings_per_item == 2 and len(raters) == 2:
        first, second = sorted(raters, key=str)
        index = {c: i for i, c in enumerate(categories)}
        table = np.zeros((len(categories), len(categories)))
        for item in used:
            table[index[item[first]], index[item[second]]] += 1
        single = [
            rater
            for rater, margin in ((first, table.sum(axis=1)), (second, table.sum(axis=0)))
            if np.count_nonzero(margin) < 2
        ]
        if single:
            return KappaResult(
                "", None, None, None, UNDEFINED_INTERVAL, observed, **base,
                reason=f"Annotator {single[0]} put every item in one category, so kappa is 0 "
                "by construction whatever the other annotator did: it is undefined here.",
            )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # z against a zero null SE
            result = cohens_kappa(table)
        # statsmodels' std_kappa is the asymptotic standard error (Fleiss, Cohen & Everitt 1969).
        std = float(result.std_kappa)
        if not std > 0:  # e.g. perfect agreement: a zero SE is not certainty
            return KappaResult(
                "cohen", float(result.kappa), None, None, UNDEFINED_INTERVAL, observed, **base
            )
        half = float(norm.ppf(0.5 + level / 2)) * std
        return KappaResult(
            "cohen",
            float(result.kappa),
            max(-1.0, float(result.kappa) - half),  # kappa lies in [-1, 1]
            min(1.0, float(result.kappa) + half),
            f"asymptotic {level:.0%} interval from statsmodels' standard error",
            observed,
            **base,
        )
    table = _fleiss_table(used, categories)
    value = _fleiss(table)
    low, high = _bootstrap(table, level=level, seed=seed)
    if low is not None and high - low <= 1e-12:  # every replicate alike: no spread to report
        low = high = None
        method = UNDEFINED_INTERVAL
    else:
        method = (
            f"bootstrap {level:.0%} percentile interval over items (B = {BOOTSTRAP_REPLICATES})"
        )
    return KappaResult("fleiss", value, low, high, method, observed, **base)


UNDEFINED_INTERVAL = (
    "undefined: the table is degenerate (e.g. perfect agreement), so the interval would have "
    "zero width, which is not certainty"
)


def _fleiss_table(items: Sequence[dict], categories: Sequence[str]) -> np.ndarray:
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(items), len(categories)), dtype=float)
    for row, item in enumerate(items):
        for category in item.values():
            table[row, index[category]] += 1
    return table


def _fleiss(table: np.ndarray) -> float | None:
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        value = float(fleiss_kappa(table, method="fleiss"))
    return None if math.isnan(value) or math.isinf(value) else value


def _bootstrap(table: np.ndarray, *, level: float, seed: int) -> tuple[float | None, float | None]:
    rng = np.random.default_rng(seed)
    n = table.shape[0]
    values = []
    for _ in range(BOOTSTRAP_REPLICATES):
        sample = table[rng.integers(0, n, size=n)]
        if np.count_nonzero(sample.sum(axis=0)) < 2:
            continue  # all ratings in one category: kappa undefined for this replicate
        value = _fleiss(sample)
        if value is not None:
            values.append(value)
    if len(values) < BOOTSTRAP_REPLICATES // 2:
        return None, None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _observed_agreement(items: Sequence[dict], categories: Sequence[str]) -> float:
    """Mean share of agreeing rater pairs per item (Fleiss' P̄; for two raters, the hit rate)."""
    table = _fleiss_table(items, categories)
    m = table.sum(axis=1)
    per_item = (table * (table - 1)).sum(axis=1) / (m * (m - 1))
    return float(per_item.mean())


@dataclass(frozen=True)
class StepAgreement:
    """Over items where every annotator marked a step: how often the steps coincide."""

    items: int
    same_step: int
    within_window: int
    window: int
    same_step_ci: tuple[float, float] | None
    within_window_ci: tuple[float, float] | None

    @property
    def same_step_share(self) -> float | None:
        return self.same_step / self.items if self.items else None

    @property
    def within_window_share(self) -> float | None:
        return self.within_window / self.items if self.items else None


def step_agreement(
    runs: Iterable[Sequence[Rating]], *, window: int = DEFAULT_WINDOW, level: float = 0.95
) -> StepAgreement:
    """Share of items (with ≥ 2 ratings, all with a step) on the same step / within ±window.

    Intervals are Wilson score intervals.
    """
    items = same = near = 0
    for ratings in runs:
        if len(ratings) < 2 or any(r.step is None for r in ratings):
            continue
        agreement = run_agreement(ratings, window=window)
        items += 1
        same += agreement.same_step
        near += agreement.within_window

    def wilson(k: int) -> tuple[float, float] | None:
        if not items:
            return None
        low, high = proportion_confint(k, items, alpha=1 - level, method="wilson")
        return float(low), float(high)

    return StepAgreement(items, same, near, window, wilson(same), wilson(near))
