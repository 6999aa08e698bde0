"""ECL, its bootstrap, knee, saturation and cross-checks on exact curves and planted sweeps."""

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from qualification.analysis.ecl import (
    ECL_AT_LEAST_LARGEST,
    ECL_BELOW_SMALLEST,
    ECL_WITHIN,
    bootstrap_means,
    bootstrap_weights,
    ecl_bootstrap,
    fixed_sequence_ecl,
    gee_crosscheck,
    isotonic_decreasing,
)
from qualification.analysis.knee import hinge_fit, kneedle_crosscheck, paired_drop_knee
from qualification.analysis.saturation import saturation_point
from qualification.analysis.simulate import analysis_rows, simulate_sweep
from qualification.analysis.sweep import trials_frame

SIX = [8000, 16000, 32000, 64000, 128000, 256000]
FIVE = SIX[:5]


def test_fixed_sequence_stops_at_the_first_failure():
    strata = [8000, 32000, 64000, 128000]
    result = fixed_sequence_ecl(strata, [0.9, 0.88, 0.84, 0.9], theta=0.85)
    assert (result.tokens, result.status, result.tested_up_to) == (32000, ECL_WITHIN, 64000)
    assert result.passed == [True, True, False, False]  # 128K passing again does not count


def test_fixed_sequence_all_pass_and_all_fail():
    strata = [8000, 32000]
    assert fixed_sequence_ecl(strata, [0.9, 0.9], 0.85).status == ECL_AT_LEAST_LARGEST
    assert fixed_sequence_ecl(strata, [0.9, 0.9], 0.85).tokens == 32000
    below = fixed_sequence_ecl(strata, [0.8, 0.9], 0.85)
    assert (below.tokens, below.status) == (None, ECL_BELOW_SMALLEST)


def test_vectorised_isotonic_fit_equals_scipy_pav():
    rng = np.random.default_rng(0)
    curves = rng.uniform(0.3, 1.0, size=(500, 7))
    curves[:5] = [[0.9, 0.95, 0.8, 0.85, 0.6, 0.6, 0.7]] * 5
    ours = isotonic_decreasing(curves)
    for row, fitted in zip(curves, ours, strict=True):
        np.testing.assert_allclose(fitted, isotonic_regression(row, increasing=False).x)
    np.testing.assert_allclose(isotonic_decreasing(np.array([0.9, 0.95, 0.8])), [0.925, 0.925, 0.8])


def test_bootstrap_weights_resample_tasks_with_replacement():
    weights = bootstrap_weights(40, 2000, np.random.default_rng(1))
    assert weights.shape == (2000, 40)
    assert (weights.sum(axis=1) == 40).all()
    assert abs(weights.mean() - 1.0) < 0.01
    rates = np.tile(np.array([[1.0, 0.5]]), (40, 1))
    np.testing.assert_allclose(bootstrap_means(rates, weights), np.tile([1.0, 0.5], (2000, 1)))


def test_ecl_bootstrap_reports_probabilities_and_the_lower_ecl():
    strata = [8000, 32000, 64000, 128000]
    # Replicate means: half clear θ at 64K, none at 128K.
    means = np.array([[0.95, 0.93, 0.88, 0.7]] * 1000 + [[0.95, 0.93, 0.82, 0.7]] * 1000)
    result = ecl_bootstrap(strata, means, 0.85, confidences=(0.95, 0.9))
    assert result.prob_at_least == [1.0, 1.0, 0.5, 0.0]
    assert result.lower_tokens == {"0.95": 32000, "0.9": 32000}
    assert result.interval_tokens == (32000, 64000)


def test_ecl_bootstrap_below_the_smallest_stratum():
    result = ecl_bootstrap([8000, 16000], np.array([[0.5, 0.4]] * 100), 0.85)
    assert result.prob_at_least == [0.0, 0.0]
    assert result.lower_tokens == {"0.95": None}
    assert result.interval_tokens == (None, None)


def test_hinge_fit_reproduces_the_methods_demo():
    fit = hinge_fit(SIX, [0.95, 0.95, 0.94, 0.93, 0.80, 0.55], [40] * 6)
    assert fit.breakpoint_tokens == 64000
    assert round(fit.plateau, 3) == 0.948
    assert round(fit.slope_per_doubling, 2) == -0.19
    assert fit.preferred == "hinge"
    gradual = hinge_fit(SIX, [0.95, 0.90, 0.85, 0.80, 0.75, 0.70], [40] * 6)
    assert gradual.breakpoint_tokens == 8000  # decline from the start
    assert gradual.preferred == "line"


def test_kneedle_behaves_as_methods_describes_and_is_gated():
    assert (
        kneedle_crosscheck(SIX, [0.95, 0.95, 0.94, 0.93, 0.80, 0.55], direction="decreasing").tokens
        == 64000
    )
    assert (
        kneedle_crosscheck(SIX, [0.95, 0.90, 0.85, 0.80, 0.75, 0.70], direction="decreasing").tokens
        is None
    )
    tiny = kneedle_crosscheck(SIX, [0.95, 0.95, 0.95, 0.949, 0.948, 0.94], direction="decreasing")
    assert (tiny.tokens, tiny.ran) == (None, False)  # a 1pp drop is not a knee
    assert (
        "fewer than 5 strata"
        in kneedle_crosscheck(SIX[:4], [1, 0.9, 0.5, 0.1], direction="decreasing").note
    )


def _planted_rates(curve, tasks=60, repeats=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.binomial(repeats, np.tile(curve, (tasks, 1))) / repeats


def test_paired_drop_knee_finds_the_last_stable_stratum():
    rates = _planted_rates([0.96, 0.96, 0.96, 0.96, 0.70, 0.50])
    weights = bootstrap_weights(60, 2000, np.random.default_rng(2))
    knee = paired_drop_knee(SIX, rates, bootstrap_means(rates, weights))
    assert knee.tokens == 64000
    assert knee.decline_starts_tokens == 128000
    assert knee.tests[-2].significant and knee.tests[-2].drop > 0.2
    assert knee.distribution["64000"] > 0.95


def test_flat_curve_has_no_knee_and_saturates_at_once():
    rates = _planted_rates([0.95] * 6, tasks=300, seed=4)
    means = bootstrap_means(rates, bootstrap_weights(300, 2000, np.random.default_rng(3)))
    knee = paired_drop_knee(SIX, rates, means)
    assert knee.tokens is None
    assert "no significant drop" in knee.note
    # Nothing to gain anywhere: saturated early (sampling noise may cost a stratum).
    assert saturation_point(SIX, rates, means).tokens in (8000, 16000)


def test_saturation_is_where_paired_gains_stop():
    # Every task has exactly these rates, so the bootstrap bounds equal the gains.
    rates = np.tile([0.50, 0.70, 0.90, 0.91, 0.91, 0.90], (40, 1))
    means = bootstrap_means(rates, bootstrap_weights(40, 500, np.random.default_rng(6)))
    result = saturation_point(SIX, rates, means)
    assert result.tokens == 32000
    assert [t.to_tokens for t in result.tests] == SIX[3:]
    assert max(t.upper_bound for t in result.tests) == pytest.approx(0.01)


def test_rising_curve_saturates_on_planted_data_with_enough_tasks():
    rates = _planted_rates([0.50, 0.70, 0.90, 0.90, 0.90, 0.90], tasks=400, seed=5)
    means = bootstrap_means(rates, bootstrap_weights(400, 2000, np.random.default_rng(6)))
    # Never before the last real gain (16K → 32K is +20pp); at most one stratum later.
    assert saturation_point(SIX, rates, means).tokens in (32000, 64000)


def test_curve_still_rising_has_no_saturation():
    still = np.tile([0.3, 0.4, 0.5, 0.6, 0.7, 0.8], (40, 1))
    means = bootstrap_means(still, bootstrap_weights(40, 500, np.random.default_rng(8)))
    result = saturation_point(SIX, still, means)
    assert result.tokens is None and "still gaining" in result.note
    assert result.verdict == "still_gaining"


def test_an_underpowered_flat_curve_is_not_called_still_gaining():
    # 12 tasks on a flat 0.8 curve: no gain, but too few tasks to show none exceeds 3 pp.
    rates = _planted_rates([0.8, 0.8, 0.8], tasks=12, seed=11)
    means = bootstrap_means(rates, bootstrap_weights(12, 2000, np.random.default_rng(12)))
    result = saturation_point(SIX[:3], rates, means)
    assert result.tokens is None
    assert "still gaining" not in result.note
    assert result.note.startswith("no saturation detected; the data cannot tell")


def test_gee_crosscheck_inverts_the_logistic_and_never_exceeds_the_passing_stratum():
    rng = np.random.default_rng(9)
    strata = np.array([8000, 16000, 32000, 64000, 128000])
    tasks = np.repeat(np.arange(50), len(strata) * 4)
    x = np.tile(np.repeat(np.log2(strata), 4), 50)
    p = 1 / (1 + np.exp(-(6.0 - 1.2 * (x - 13))))
    y = (rng.random(x.size) < p).astype(float)
    free = gee_crosscheck(y, x, tasks, theta=0.85, cap_tokens=128000)
    expected = 2 ** ((np.log(0.85 / 0.15) - 6.0) / -1.2 + 13)
    assert free.tokens == pytest.approx(expected, rel=0.25)
    assert free.low < free.tokens < free.high and not free.capped
    capped = gee_crosscheck(y, x, tasks, theta=0.85, cap_tokens=16000)
    assert capped.capped and capped.tokens == 16000 and capped.uncapped_tokens > 16000


def test_gee_crosscheck_refuses_separated_data():
    check = gee_crosscheck(
        np.ones(40), np.log2(np.repeat([8000, 16000], 20)), np.arange(40) % 10, theta=0.85
    )
    assert check.tokens is None and "separates" in check.note


def test_gee_crosscheck_on_a_flat_curve_reports_no_crossing_instead_of_overflowing():
    # Planted flat at .97 (4 repeats): the fitted slope is −1e-16, i.e. 0 up to rounding, which
    # put the θ crossing at 2**(10**16) tokens and raised OverflowError inside the analysis job.
    frame = trials_frame(
        analysis_rows(simulate_sweep({"r": [0.97] * 5}, FIVE, tasks=40, repeats=4))
    ).sort_values(["task", "stratum", "repeat"])
    check = gee_crosscheck(
        frame["task_correct"].to_numpy(dtype=float),
        np.log2(frame["stratum"].to_numpy(dtype=float)),
        frame["task"].to_numpy(),
        theta=0.85,
        cap_tokens=128000,
    )
    assert (check.tokens, check.low, check.high, check.uncapped_tokens) == (None,) * 4
    assert -1e-9 < check.logit_slope_per_doubling < 0
    assert check.note == "the fitted decline is too shallow to cross θ below 2^64 tokens"
