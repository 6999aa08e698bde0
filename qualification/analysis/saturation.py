"""Saturation: where adding context stops improving an outcome (METHODS.md §3).

The smallest stratum L_s such that for every larger L the paired gain acc(L) − acc(L_s) has a
one-sided upper bound below ε — an equivalence-style "no meaningful gain" test, with bounds
from the paired cluster bootstrap over tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GainTest:
    from_tokens: int
    to_tokens: int
    gain: float
    upper_bound: float


@dataclass(frozen=True)
class SaturationResult:
    tokens: int | None  # None: still gaining at the largest tested stratum
    epsilon: float
    confidence: float
    tests: list[GainTest]  # the gains from the saturation point (or the last candidate tried)
    note: str


def saturation_point(
    strata,
    task_rates: np.ndarray,
    replicate_means: np.ndarray,
    *,
    epsilon: float = 0.03,
    confidence: float = 0.95,
) -> SaturationResult:
    strata = [int(s) for s in strata]
    means = task_rates.mean(axis=0)
    last_tests: list[GainTest] = []
    # The largest stratum satisfies the rule vacuously; it is not evidence of saturation.
    for s in range(len(strata) - 1):
        tests = []
        for later in range(s + 1, len(strata)):
            boot_gain = replicate_means[:, later] - replicate_means[:, s]
            bound = float(np.quantile(boot_gain, confidence, method="inverted_cdf"))
            tests.append(GainTest(strata[s], strata[later], float(means[later] - means[s]), bound))
        last_tests = tests
        if all(t.upper_bound < epsilon for t in tests):
            return SaturationResult(
                strata[s],
                epsilon,
                confidence,
                tests,
                f"no later stratum gains {epsilon:.0%} or more (one-sided {confidence:.0%} bound)",
            )
    return SaturationResult(
        None,
        epsilon,
        confidence,
        last_tests,
        "still gaining at the largest tested strata" if len(strata) > 1 else "one stratum only",
    )
