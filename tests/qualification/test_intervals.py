"""Reference values for the binomial and task-clustered intervals, pass^k and RULER averages."""

import math

import numpy as np
import pytest
from scipy import stats

from qualification.analysis.intervals import (
    binomial_interval,
    binomial_lower_bound,
    min_tasks_for_all_pass,
    pass_hat_k,
    ruler_weighted_averages,
    task_clustered_interval,
)


@pytest.mark.parametrize(
    ("count", "method", "expected"),
    [
        (18, "wilson", (0.699, 0.972)),
        (20, "wilson", (0.839, 1.0)),
        (18, "beta", (0.683, 0.988)),
        (20, "beta", (0.832, 1.0)),
    ],
)
def test_methods_reference_intervals(count, method, expected):
    low, high = binomial_interval(count, 20, alpha=0.05, method=method)
    assert (round(low, 3), round(high, 3)) == expected


def test_wilson_matches_the_closed_form():
    z = stats.norm.ppf(0.975)
    p, n = 18 / 20, 20
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert binomial_interval(18, 20, alpha=0.05, method="wilson") == pytest.approx(
        (centre - half, centre + half)
    )


def test_one_sided_all_pass_bounds_have_their_closed_forms():
    z = stats.norm.ppf(0.95)
    assert binomial_lower_bound(30, 30, alpha=0.05, method="wilson") == pytest.approx(
        30 / (30 + z * z)
    )
    assert binomial_lower_bound(30, 30, alpha=0.05, method="beta") == pytest.approx(
        0.05 ** (1 / 30)
    )


@pytest.mark.parametrize(
    ("theta", "wilson", "cp", "jeffreys"),
    [(0.80, 11, 14, 9), (0.856, 17, 20, 13), (0.90, 25, 29, 18), (0.95, 52, 59, 38)],
)
def test_minimum_task_table(theta, wilson, cp, jeffreys):
    assert min_tasks_for_all_pass(theta, alpha=0.05, method="wilson") == wilson
    assert min_tasks_for_all_pass(theta, alpha=0.05, method="beta") == cp
    assert min_tasks_for_all_pass(theta, alpha=0.05, method="jeffreys") == jeffreys


def test_minimum_tasks_rejects_impossible_thresholds():
    with pytest.raises(ValueError, match="θ"):
        min_tasks_for_all_pass(1.0, alpha=0.05, method="wilson")
    with pytest.raises(ValueError, match="interval method"):
        binomial_interval(1, 2, alpha=0.05, method="normal-ish")


def test_ruler_weighted_averages_reproduce_the_readme():
    gpt4 = ruler_weighted_averages([96.6, 96.3, 95.2, 93.2, 87.0, 81.2])
    assert round(gpt4.average, 1) == 91.6
    assert round(gpt4.weighted_increasing, 1) == 89.0
    assert round(gpt4.weighted_decreasing, 1) == 94.1
    llama = ruler_weighted_averages([96.5, 95.8, 95.4, 94.8, 88.4, 66.6])
    assert (round(llama.weighted_increasing, 1), round(llama.weighted_decreasing, 1)) == (
        85.5,
        93.7,
    )


def test_pass_hat_k_is_the_unbiased_combinatorial_estimate():
    estimate = pass_hat_k([5, 4, 4, 3, 2], [5, 5, 5, 5, 1], k=2)
    assert estimate[0] == 1.0
    assert estimate[1] == pytest.approx(6 / 10)
    assert estimate[3] == pytest.approx(3 / 10)
    assert np.isnan(estimate[4])  # one repeat cannot estimate pass^2
    assert pass_hat_k([4], [5], k=5)[0] == 0.0
    assert pass_hat_k([4], [5], k=1)[0] == pytest.approx(0.8)


def test_task_clustered_interval_is_korn_graubard_over_tasks():
    rates = [1.0, 0.8, 0.6, 1.0, 1.0, 0.8, 0.4, 1.0]
    mean, sd, n = np.mean(rates), np.std(rates, ddof=1), len(rates)
    n_eff = mean * (1 - mean) / (sd**2 / n) * (stats.norm.ppf(0.95) / stats.t.ppf(0.95, n - 1)) ** 2
    interval = task_clustered_interval(rates, alpha=0.05)
    # Clopper–Pearson at 90% on (mean × n_eff) successes of n_eff.
    assert interval.mean == pytest.approx(mean)
    assert interval.low == pytest.approx(
        stats.beta.ppf(0.05, mean * n_eff, n_eff - mean * n_eff + 1)
    )
    assert interval.high == pytest.approx(
        stats.beta.ppf(0.95, mean * n_eff + 1, n_eff - mean * n_eff)
    )
    assert interval.n == 8
    assert interval.method == "Korn–Graubard over tasks"


def test_all_pass_falls_back_to_the_binomial_bound_over_tasks():
    interval = task_clustered_interval([1.0] * 40, alpha=0.05)
    z = stats.norm.ppf(0.95)
    assert interval.mean == 1.0
    assert interval.low == pytest.approx(40 / (40 + z * z))  # 0.937, not a zero-width 1.0
    assert interval.high == 1.0
    exact = task_clustered_interval([1.0] * 40, alpha=0.05, method="beta")
    assert exact.low == pytest.approx(0.05 ** (1 / 40))


def test_nearly_all_pass_is_never_more_certain_than_all_pass():
    rates = [1.0] * 39 + [0.8]
    interval = task_clustered_interval(rates, alpha=0.05)
    assert interval.low <= 40 / (40 + stats.norm.ppf(0.95) ** 2) + 1e-12


def test_all_fail_has_zero_lower_bound():
    interval = task_clustered_interval([0.0] * 25, alpha=0.05)
    assert interval.mean == 0.0 and interval.low == 0.0 and 0 < interval.high < 0.15
