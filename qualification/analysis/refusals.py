"""When the data cannot support an ECL: which rule refused, and what data would fix it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import numfmt
from qualification.analysis.intervals import BINOMIAL_METHODS, min_tasks_for_all_pass

RULE_NO_TRIALS = "no_trials"
RULE_MIN_REPEATS = "min_repeats"
RULE_MIN_TASKS = "min_tasks"
RULE_UNPAIRED = "unpaired"

RULE_TITLES = {
    RULE_NO_TRIALS: "No trials",
    RULE_MIN_REPEATS: "Too few repeats",
    RULE_MIN_TASKS: "Too few tasks for θ",
    RULE_UNPAIRED: "Tasks not paired across strata",
}


@dataclass(frozen=True)
class Refusal:
    rule: str
    family: str
    message: str
    remedy: str
    strata: list[int] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)


def _listing(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def check_refusals(
    *,
    family: str,
    tasks: list[str],
    strata: list[int],
    repeats: np.ndarray,
    theta: float,
    alpha: float,
    interval_method: str,
    min_repeats: int,
) -> list[Refusal]:
    """Apply the three refusal rules to a family's task × stratum repeat counts (0 = missing)."""
    if not tasks or not strata:
        return [
            Refusal(
                RULE_NO_TRIALS,
                family,
                f"{family} has no trials.",
                "Upload trials: every task at every stratum, with at least "
                f"{min_repeats} repeats each.",
            )
        ]
    refusals: list[Refusal] = []
    missing = repeats == 0
    if missing.any():
        unpaired = [tasks[i] for i in np.nonzero(missing.any(axis=1))[0]]
        gaps = [
            f"{tasks[i]} (missing {', '.join(numfmt.tokens(strata[j]) for j in np.nonzero(missing[i])[0])})"
            for i in np.nonzero(missing.any(axis=1))[0]
        ]
        short_strata = [strata[j] for j in np.nonzero(missing.any(axis=0))[0]]
        refusals.append(
            Refusal(
                RULE_UNPAIRED,
                family,
                f"{len(unpaired)} of {len(tasks)} {family} tasks are not run at every stratum: "
                f"{_listing(gaps)}. Comparisons across strata need the same tasks in each.",
                "Run the missing task × stratum cells, or leave these tasks out of the sweep.",
                strata=short_strata,
                tasks=unpaired,
            )
        )
    short = (repeats > 0) & (repeats < min_repeats)
    if short.any():
        parts = []
        short_strata = []
        for j in np.nonzero(short.any(axis=0))[0]:
            count = int(short[:, j].sum())
            fewest = int(repeats[short[:, j], j].min())
            parts.append(
                f"{numfmt.tokens(strata[j])}: {count} task{'s' if count != 1 else ''} "
                f"(fewest {fewest})"
            )
            short_strata.append(strata[j])
        refusals.append(
            Refusal(
                RULE_MIN_REPEATS,
                family,
                f"Strata with fewer than {min_repeats} repeats per task in {family}: "
                f"{_listing(parts)}. Reliability across repeats cannot be estimated, and one "
                "passing run is no evidence of a threshold.",
                f"Run at least {min_repeats} independent repeats (5 preferred) of every task at "
                f"{', '.join(numfmt.tokens(s) for s in short_strata)}.",
                strata=short_strata,
                tasks=[tasks[i] for i in np.nonzero(short.any(axis=1))[0]],
            )
        )
    needed = min_tasks_for_all_pass(theta, alpha=alpha, method=interval_method)
    if len(tasks) < needed:
        refusals.append(
            Refusal(
                RULE_MIN_TASKS,
                family,
                f"{family} has {len(tasks)} tasks; at θ = {theta:g} with a one-sided "
                f"{1 - alpha:.0%} {BINOMIAL_METHODS[interval_method]} bound even an all-pass "
                f"result needs at least {needed} tasks, so θ is not reachable.",
                f"Add at least {needed - len(tasks)} tasks to {family} and run them at every "
                "stratum.",
            )
        )
    return refusals
