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
    lower_bound: float | None = None


@dataclass(frozen=True)
class SaturationResult:
    tokens: int | None  # None: no saturation detected
    epsilon: float
    confidence: float
    tests: list[GainTest]  # the gains from the saturation point (or the last candidate tried)
    note: str
    # "saturated"; "still_gaining" (the last step's gain has a lower bound above 0);
    # "cannot_tell" (no saturation, and no gain either: the test lacks power); "one_stratum".
    verdict: str = ""


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
            low = float(np.quantile(boot_gain, 1 - confidence, method="inverted_cdf"))
            gain = float(means[later] - means[s])
            tests.append(GainTest(strata[s], strata[later], gain, bound, low))
        last_tests = tests
        if all(t.upper_bound < epsilon for t in tests):
            return SaturationResult(
                strata[s],
                epsilon,
                confidence,
                tests,
                f"no later stratum gains {epsilon:.0%} or more (one-sided {confidence:.0%} bound)",
                "saturated",
            )
    if len(strata) < 2:
        return SaturationResult(
            None, epsilon, confidence, last_tests, "one stratum only", "one_stratum"
        )
    # Failing the "no gain > ε" test is not evidence of a gain: say "still gaining" only when
    # the top step's gain is itself significant.
    if any(t.lower_bound is not None and t.lower_bound > 0 for t in last_tests):
        return SaturationResult(
            None, epsilon, confidence, last_tests,
            f"still gaining: the largest stratum gains over the one before it (one-sided "
            f"{confidence:.0%} lower bound above 0)",
            "still_gaining",
        )  # fmt: skip
    return SaturationResult(
        None, epsilon, confidence, last_tests,
        "no saturation detected; the data cannot tell (no gain is significant either, and "
        f"none is shown to stay below {epsilon:.0%})",
        "cannot_tell",
    )  # fmt: skip
