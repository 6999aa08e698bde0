"""What the audit found (seed 001 §6.2–6.4), computed from judged item ids. Pure.

Token counts come from the packet's inventory: a judgment names items, never a percentage.
Each step counts once, by its first judgment (of the judge kind asked for); further judgments
of the same step enter only the agreement figures. Medians carry a distribution-free interval
from order statistics; shares of steps carry Wilson score intervals; agreement between two
judges is Cohen's kappa (Fleiss' when the judges differ between steps) and the mean Jaccard
overlap of their active item sets with a bootstrap interval over steps.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from statistics import median

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from traces.annotations.analysis.aggregates import median_interval
from traces.annotations.analysis.agreement import KappaResult, kappa_for_items

COUNTERFACTUALS: dict[str, str] = {
    "unaffected": "Unaffected",
    "slightly_degraded": "Slightly degraded",
    "materially_degraded": "Materially degraded",
    "impossible": "Impossible",
}
COUNTERFACTUAL_QUESTION = (
    "If everything except the most recent 30,000 tokens were replaced by a 5,000-token "
    "summary, would this step be unaffected, slightly degraded, materially degraded, or "
    "impossible?"
)
CONFIDENCE_ORDER = {"low": 0, "medium": 1, "high": 2}
LEVEL = 0.95
MEDIAN_METHOD = (
    "median; distribution-free interval from order statistics (binomial, coverage ≥ 95%); "
    "none below 6 steps"
)
WILSON_METHOD = "Wilson score 95% interval"
BOOTSTRAP_REPLICATES = 2000


@dataclass(frozen=True)
class JudgedStep:
    """One judgment with what the fractions need of its step."""

    step_id: Hashable
    judge: Hashable  # who judged: a user or an LLM judge label
    judge_kind: str  # "human" or "llm"
    task_type: str
    band: str  # the band of the step's own window
    window_tokens: int
    active_ids: frozenset[int]
    helpful_ids: frozenset[int]
    verbatim_needed: bool
    counterfactual: str
    confidence: str
    order: int  # creation order: the first judgment of a step counts


def tokens_of(ids, item_tokens: Sequence[int]) -> int:
    """Sum of the inventory tokens of item ids (1-based)."""
    return sum(item_tokens[i - 1] for i in ids)


@dataclass(frozen=True)
class Median:
    value: float | None
    ci: tuple[float, float] | None


def _median(values: Sequence[float]) -> Median:
    if not values:
        return Median(None, None)
    interval = median_interval(list(values), LEVEL)
    return Median(float(median(values)), (interval[0][0], interval[0][1]) if interval else None)


@dataclass(frozen=True)
class Share:
    k: int
    n: int
    share: float | None
    ci: tuple[float, float] | None


def wilson(k: int, n: int) -> Share:
    if n == 0:
        return Share(0, 0, None, None)
    low, high = proportion_confint(k, n, alpha=1 - LEVEL, method="wilson")
    return Share(k, n, k / n, (float(low), float(high)))


@dataclass(frozen=True)
class BandRow:
    band: str
    n: int
    window: Median
    active_tokens: Median
    active_share: Median
    helpful_tokens: Median
    helpful_share: Median


@dataclass(frozen=True)
class Agreement:
    steps: int  # steps judged by two or more judges
    counterfactual: KappaResult
    verbatim: KappaResult
    active_jaccard: float | None
    active_jaccard_ci: tuple[float, float] | None
    jaccard_method: str


@dataclass(frozen=True)
class AuditResults:
    n_judgments: int
    n_steps: int
    bands: list[BandRow]
    verbatim_by_task: dict[str, Share]
    verbatim_overall: Share
    counterfactual: dict[str, Share]
    agreement: Agreement
    median_method: str = MEDIAN_METHOD
    share_method: str = WILSON_METHOD
    basis: str = "each step once, by its first judgment"
    excluded_low_confidence: int = 0
    notes: list[str] = field(default_factory=list)


def first_per_step(judgments: Sequence[JudgedStep]) -> list[JudgedStep]:
    first: dict[Hashable, JudgedStep] = {}
    for judgment in sorted(judgments, key=lambda j: j.order):
        first.setdefault(judgment.step_id, judgment)
    return list(first.values())


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """Overlap of two item sets; two empty sets agree fully."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _agreement(judgments: Sequence[JudgedStep], seed: int) -> Agreement:
    by_step: dict[Hashable, list[JudgedStep]] = defaultdict(list)
    for judgment in sorted(judgments, key=lambda j: j.order):
        by_step[judgment.step_id].append(judgment)
    multi = {step: js for step, js in by_step.items() if len({j.judge for j in js}) >= 2}
    cf_items, vb_items, overlaps = [], [], []
    for js in multi.values():
        latest: dict[Hashable, JudgedStep] = {}
        for j in js:
            latest[j.judge] = j  # a judge who judged twice counts with their latest answer
        cf_items.append({judge: j.counterfactual for judge, j in latest.items()})
        vb_items.append(
            {judge: "yes" if j.verbatim_needed else "no" for judge, j in latest.items()}
        )
        pair = list(latest.values())[:2]
        overlaps.append(jaccard(pair[0].active_ids, pair[1].active_ids))
    mean_overlap = float(np.mean(overlaps)) if overlaps else None
    ci = None
    if len(overlaps) >= 2:
        rng = np.random.default_rng(seed)
        values = np.asarray(overlaps)
        boots = values[rng.integers(0, len(values), size=(BOOTSTRAP_REPLICATES, len(values)))]
        means = boots.mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        ci = None if high - low <= 1e-12 else (float(low), float(high))
    method = (
        f"mean Jaccard overlap of the first two judges' active items; bootstrap 95% "
        f"percentile interval over steps (B = {BOOTSTRAP_REPLICATES}); undefined when every "
        "step agrees alike"
    )
    return Agreement(
        steps=len(multi),
        counterfactual=kappa_for_items(cf_items, seed=seed),
        verbatim=kappa_for_items(vb_items, seed=seed),
        active_jaccard=mean_overlap,
        active_jaccard_ci=ci,
        jaccard_method=method,
    )


def audit_results(
    judgments: Sequence[JudgedStep],
    *,
    item_tokens: dict[Hashable, Sequence[int]],
    step_packet: dict[Hashable, Hashable],
    band_order: Sequence[str],
    task_order: Sequence[str],
    judge_kind: str | None = None,
    min_confidence: str = "low",
    seed: int = 0,
) -> AuditResults:
    """The audit's fractions. `item_tokens` maps a packet to its inventory sizes and
    `step_packet` a step to its packet; `judge_kind` keeps one kind ('human' or 'llm')."""
    kept = [j for j in judgments if judge_kind in (None, "", j.judge_kind)]
    floor = CONFIDENCE_ORDER[min_confidence]
    confident = [j for j in kept if CONFIDENCE_ORDER.get(j.confidence, 0) >= floor]
    excluded = len(kept) - len(confident)
    steps = first_per_step(confident)

    per_band: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for j in steps:
        sizes = item_tokens[step_packet[j.step_id]]
        per_band[j.band].append(
            (j.window_tokens, tokens_of(j.active_ids, sizes), tokens_of(j.helpful_ids, sizes))
        )
    bands = []
    for band in band_order:
        rows = per_band.get(band, [])
        windows = [w for w, _, _ in rows]
        bands.append(
            BandRow(
                band=band,
                n=len(rows),
                window=_median(windows),
                active_tokens=_median([a for _, a, _ in rows]),
                active_share=_median([a / w for w, a, _ in rows if w > 0]),
                helpful_tokens=_median([h for _, _, h in rows]),
                helpful_share=_median([h / w for w, _, h in rows if w > 0]),
            )
        )

    verbatim_by_task = {}
    for task in task_order:
        of_task = [j for j in steps if j.task_type == task]
        if of_task:
            verbatim_by_task[task] = wilson(sum(j.verbatim_needed for j in of_task), len(of_task))
    counterfactual = {
        slug: wilson(sum(j.counterfactual == slug for j in steps), len(steps))
        for slug in COUNTERFACTUALS
    }
    return AuditResults(
        n_judgments=len(confident),
        n_steps=len(steps),
        bands=bands,
        verbatim_by_task=verbatim_by_task,
        verbatim_overall=wilson(sum(j.verbatim_needed for j in steps), len(steps)),
        counterfactual=counterfactual,
        agreement=_agreement(confident, seed),
        excluded_low_confidence=excluded,
    )
