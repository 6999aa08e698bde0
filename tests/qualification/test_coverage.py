"""Seeded simulations: the one-sided 95% lower bounds behind the ECL and the production limit
cover the truth at least nominally (40 tasks × 5 repeats, as in issue 18)."""

import numpy as np
import pytest
from scipy.special import expit, logit

from qualification.analysis.ecl import bootstrap_means, bootstrap_weights, ecl_uncertainty
from qualification.analysis.intervals import task_clustered_interval

TASKS, REPEATS = 40, 5


def _task_rates(rng, p, spread, sweeps, strata=1):
    """(sweeps, tasks, strata) per-task pass rates; a task's difficulty is shared by strata."""
    offsets = rng.normal(0.0, spread, size=(sweeps, TASKS, 1))
    p_task = expit(logit(np.asarray(p, dtype=float)) + offsets)
    return rng.binomial(REPEATS, p_task) / REPEATS


def _population_mean(p, spread):
    """E[expit(logit p + u)], u ~ N(0, spread²), by Gauss–Hermite quadrature."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    return float((expit(logit(p) + spread * nodes) * weights).sum() / weights.sum())


@pytest.mark.slow
@pytest.mark.parametrize(("p", "spread"), [(0.85, 0.0), (0.93, 0.0), (0.95, 1.0), (0.93, 2.0)])
def test_stratum_lower_bound_covers_the_true_accuracy(p, spread):
    rng = np.random.default_rng([18, int(p * 100), int(spread * 10)])
    truth = _population_mean(p, spread)
    rates = _task_rates(rng, p, spread, sweeps=1000)[:, :, 0]
    lows = np.array([task_clustered_interval(r, alpha=0.05).low for r in rates])
    coverage = float(np.mean(lows <= truth))
    assert coverage >= 0.94, f"coverage {coverage:.3f} at p={p}, task spread {spread}"


@pytest.mark.slow
def test_lower_ecl_exceeds_the_true_ecl_no_more_than_nominally():
    # The stratum after the true ECL (32K) sits just under θ: the hardest case for a lower bound.
    strata = [8000, 32000, 64000, 128000]
    curve, theta = [0.95, 0.92, 0.845, 0.70], 0.85
    rng = np.random.default_rng(1818)
    rates = _task_rates(rng, curve, 0.0, sweeps=1000)
    exceeded = 0
    for sweep in rates:
        weights = bootstrap_weights(TASKS, 2000, rng)
        result = ecl_uncertainty(
            strata, sweep, bootstrap_means(sweep, weights), theta, confidences=(0.95,)
        )
        lower = result.lower_tokens["0.95"]
        exceeded += lower is not None and lower > 32000
    coverage = 1 - exceeded / len(rates)
    assert coverage >= 0.94, f"the 95% lower ECL exceeded the true ECL in {exceeded} of 1,000"
