"""The cycle model against seed 001's published figures and METHODS.md §6's checked table."""

import json

import numpy as np
import pytest

from traces.analysis.cycle import (
    MAX_GROWTH,
    MAX_PENALTY,
    MAX_TOKENS,
    CycleInputError,
    CycleParams,
    cost_per_step,
    evaluate,
    exchange_rate,
    floor_threshold,
    optimum,
    sensitivity,
    steps_per_cycle,
    tail_scenario,
    within_region,
)

SEED = dict(post_compaction=65_588, growth_per_step=1_470, summary=4_382)


def params(p):
    return CycleParams(penalty_steps=p, **SEED)


@pytest.mark.parametrize(
    ("p", "t_star", "f_min", "low", "high"),
    [
        (0, 79_931, 81_401, 70_758, 105_384),
        (28, 219_970, 221_440, 167_921, 316_308),
        (55, 314_341, 315_811, 238_208, 453_636),
        (65, 347_375, 348_845, 263_052, 501_467),
        (113, 499_776, 501_246, 378_475, 721_327),
        (138, 576_952, 578_422, 437_223, 832_367),
        (145, 598_403, 599_873, 453_573, 863_207),
    ],
)
def test_methods_table(p, t_star, f_min, low, high):
    q = params(p)
    assert optimum(q) == pytest.approx(t_star, abs=1)
    assert float(cost_per_step(optimum(q), q)) == pytest.approx(f_min, abs=1)
    region = within_region(q)
    assert region[0] == pytest.approx(low, abs=1.5) and region[1] == pytest.approx(high, abs=1.5)


def test_closed_form_matches_a_one_token_grid_search():
    q = params(28)
    grid = np.arange(100_000, 400_000, 1.0)
    assert grid[np.nanargmin(cost_per_step(grid, q))] == pytest.approx(optimum(q), abs=1)
    # and the within-10% roots are where f crosses 1.1·f(T*)
    low, high = within_region(q)
    f_star = optimum(q) + q.growth_per_step
    assert float(cost_per_step(low, q)) == pytest.approx(1.1 * f_star, rel=1e-9)
    assert float(cost_per_step(high, q)) == pytest.approx(1.1 * f_star, rel=1e-9)


def test_seed_claims():
    q = params(28)
    result = evaluate(q, thresholds=[90_000 + optimum(q) - optimum(q), 900_000])
    assert result.optimum_threshold == pytest.approx(220_000, rel=0.001)  # "minimum at 220,000"
    assert (round(result.within_10pct[0], -3), round(result.within_10pct[1], -3)) == (
        168_000,
        316_000,
    )
    assert floor_threshold(q) == pytest.approx(
        106_748
    )  # "below approximately 110k the cycle fails"
    assert result.ratios[900_000] == pytest.approx(
        2.3, abs=0.02
    )  # "2.3x worse than compacting at 220k"
    # "Compacting 90k early costs 1.79x, 96k late costs 1.10x"
    early, late = optimum(q) - 90_000, optimum(q) + 96_000
    f_star = result.optimum_cost_per_step
    assert float(cost_per_step(early, q)) / f_star == pytest.approx(1.79, abs=0.01)
    assert float(cost_per_step(late, q)) / f_star == pytest.approx(1.10, abs=0.01)
    q55 = params(55)
    assert floor_threshold(q55) == pytest.approx(146_000, rel=0.01)
    assert float(cost_per_step(900_000, q55)) / (optimum(q55) + 1470) == pytest.approx(
        1.72, abs=0.01
    )


def test_sensitivity_table_reproduces_seed_optima():
    rows = sensitivity(params(0), [65.8, 113.1, 138.0, 145.5])
    assert [round(r["optimum_threshold"], -3) for r in rows] == [350_000, 500_000, 577_000, 600_000]


def test_exchange_rate_of_seed_section_7_5():
    rate = exchange_rate(params(31), 232_000, 600_000)
    assert rate.extra_tokens_per_1000_steps == pytest.approx(139e6, rel=0.01)
    assert rate.disruptions_avoided_per_1000_steps == pytest.approx(6.1, abs=0.05)
    assert rate.tokens_per_disruption_avoided == pytest.approx(23e6, rel=0.02)


def test_tail_scenario_lands_higher_and_reads_less():
    base = params(55)
    tail = tail_scenario(base, 60_000, 27.5)
    assert (tail.post_compaction, tail.penalty_steps) == (125_588, 27.5)
    # The seed's lever: a 350k threshold with a 60k tail beats 600k with a bare digest.
    assert float(cost_per_step(350_000, tail)) < float(cost_per_step(600_000, base))


@pytest.mark.parametrize(
    ("values", "field"),
    [
        (dict(growth_per_step=0), "growth_per_step"),
        (dict(growth_per_step=-5), "growth_per_step"),
        (dict(penalty_steps=-1), "penalty_steps"),
        (dict(post_compaction=0), "post_compaction_tokens"),
        (dict(summary=-3), "summary_tokens"),
    ],
)
def test_invalid_parameters_name_the_field(values, field):
    base = {**SEED, "penalty_steps": 28, **values}
    with pytest.raises(CycleInputError) as error:
        evaluate(CycleParams(**base))
    assert error.value.field == field


def test_threshold_at_or_below_s_is_refused():
    with pytest.raises(CycleInputError, match="must be above S") as error:
        evaluate(params(28), thresholds=[65_588])
    assert error.value.field == "thresholds"


def test_below_floor_threshold_has_no_ratio_and_says_why():
    # Seed parameters: S = 65,588 < 100,000 < the floor S + P·D = 106,748.
    result = evaluate(params(28), thresholds=[100_000, 600_000])
    below, above = result.at_thresholds
    assert (below.threshold, below.ratio, below.cost_per_step, below.below_floor) == (
        100_000,
        None,
        None,
        True,
    )
    assert below.reason.startswith("below floor: T = 100,000 is at or below S + P·D = 106,748")
    assert above.below_floor is False and above.reason is None
    assert above.ratio == pytest.approx(
        float(cost_per_step(600_000, params(28))) / 221_440, rel=1e-4
    )
    data = result.as_dict()
    assert data["ratios"] == {"100000": None, "600000": round(above.ratio, 4)}
    json.dumps(data, allow_nan=False)  # no inf or NaN reaches JSON
    # exactly at the floor the cycle returns no work either
    assert evaluate(params(28), thresholds=[106_748]).at_thresholds[0].below_floor


def test_threshold_keys_are_exact_integer_tokens():
    q = params(28)
    result = evaluate(q, thresholds=[1_000_000, 1_234_567, 1_234_568, 1_000_000.0])
    data = result.as_dict()
    assert list(data["ratios"]) == ["1000000", "1234567", "1234568"]  # no "1e+06", no collision
    f_star = optimum(q) + q.growth_per_step
    for key, ratio in data["ratios"].items():
        assert ratio == pytest.approx(float(cost_per_step(int(key), q)) / f_star, abs=1e-4)
    assert result.ratios[1_234_567] < result.ratios[1_234_568]  # f rises above T*: two values
    assert [row["threshold"] for row in data["at_thresholds"]] == [1_000_000, 1_234_567, 1_234_568]


@pytest.mark.parametrize(
    ("values", "thresholds", "field"),
    [
        (dict(penalty_steps=1e308), [], "penalty_steps"),
        (dict(penalty_steps=MAX_PENALTY + 1), [], "penalty_steps"),
        (dict(growth_per_step=1e308), [], "growth_per_step"),
        (dict(growth_per_step=float("nan")), [], "growth_per_step"),
        (dict(post_compaction=1e12), [], "post_compaction_tokens"),
        (dict(summary=float("inf")), [], "summary_tokens"),
        ({}, [1e308], "thresholds"),
        ({}, [MAX_TOKENS + 1], "thresholds"),
        ({}, [float("nan")], "thresholds"),
    ],
)
def test_absurd_inputs_are_refused_with_the_field(values, thresholds, field):
    base = {**SEED, "penalty_steps": 28, **values}
    with pytest.raises(CycleInputError) as error:
        evaluate(CycleParams(**base), thresholds=thresholds)
    assert error.value.field == field


def test_largest_accepted_inputs_stay_finite():
    q = CycleParams(MAX_TOKENS / 2, MAX_GROWTH, MAX_TOKENS, MAX_PENALTY)
    data = evaluate(q, thresholds=[MAX_TOKENS]).as_dict()
    json.dumps(data, allow_nan=False)
    assert data["optimum_threshold"] > data["floor_threshold"] > MAX_TOKENS
    assert data["ratios"] == {str(MAX_TOKENS): None}  # a 100M threshold is below this floor


def test_exchange_rate_states_its_units_and_gives_both_consistent_variants():
    p = params(31)
    rate = exchange_rate(p, 232_000, 600_000)
    assert "productive steps ÷ compactions per 1,000 total steps" in rate.units
    n_low, n_high = steps_per_cycle(232_000, p), steps_per_cycle(600_000, p)
    f_low, f_high = cost_per_step(232_000, p), cost_per_step(600_000, p)
    # Both per 1,000 productive steps: one compaction per n − P productive steps.
    productive = rate.per_productive_step
    assert productive["disruptions_avoided"] == pytest.approx(
        1000 / (n_low - 31) - 1000 / (n_high - 31)
    )
    assert productive["tokens_per_disruption_avoided"] == pytest.approx(
        1000 * (f_high - f_low) / productive["disruptions_avoided"]
    )
    # Both per 1,000 total steps: a cycle's cost f·(n − P) over its n steps.
    total = rate.per_total_step
    assert total["extra_tokens"] == pytest.approx(
        1000 * (f_high * (n_high - 31) / n_high - f_low * (n_low - 31) / n_low)
    )
    assert total["tokens_per_disruption_avoided"] == pytest.approx(
        total["extra_tokens"] / rate.disruptions_avoided_per_1000_steps
    )
    # The seed's mixed figure (23M) sits apart from both consistent ones.
    prices = [productive["tokens_per_disruption_avoided"], total["tokens_per_disruption_avoided"]]
    assert all(abs(x / rate.tokens_per_disruption_avoided - 1) > 0.05 for x in prices)
    assert rate.as_dict()["per_total_step"]["extra_tokens"] == pytest.approx(
        total["extra_tokens"], abs=1e-3
    )
