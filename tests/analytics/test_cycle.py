"""The cycle model against seed 001's published figures and METHODS.md §6's checked table."""

import json

import numpy as np
import pytest

from traces.analysis.cycle import (
    DEFAULT_DISRUPTION_STEPS,
    MAX_GROWTH,
    MAX_PENALTY,
    MAX_TOKENS,
    SECTION_8_1,
    CycleInputError,
    CycleParams,
    Scenario,
    compare_scenarios,
    cost_per_step,
    degraded_share,
    evaluate,
    exchange_rate,
    floor_threshold,
    mean_window,
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


# --- per cycle: mean window, steps, degraded share (seed 001 §7.3, §8) -----------------


def simulate_cycles(s, d, summ, p, threshold, disruption, cycles=4000):
    """A session stepped one call at a time, independently of the closed forms: the window
    grows by d per step (billed at its mid-step size, as the model integrates the climb),
    compacts when it reaches the threshold (the overshoot carries over, so the long-run rate
    is exact), pays T + SUMM for the compaction and s for each of the p re-reading steps
    (the seed's accounting), and a step counts as degraded while it is among the first
    `disruption` steps after a compaction."""
    window, since, steps, degraded, billed, compactions = float(s), 0, 0, 0, 0.0, 0
    while compactions < cycles:
        steps += 1
        since += 1
        degraded += since <= disruption
        if window + d < threshold:
            billed += window + d / 2
            window += d
            continue
        # The step crosses the threshold: the part before it at the old window, the rest
        # after the compaction, from s.
        before = (threshold - window) / d
        window = s + (window + d - threshold)
        billed += before * (threshold + (threshold - before * d)) / 2
        billed += (1 - before) * (s + window) / 2
        compactions += 1
        billed += threshold + summ + p * s
        since = 0
    return {
        "steps_per_cycle": steps / compactions,
        "mean_window": (billed - compactions * (threshold + summ + p * s)) / steps,
        "degraded_share": degraded / steps,
        "cost_per_productive_step": billed / (steps - p * compactions),
    }


def test_seed_degraded_share_29_percent_at_220k_against_9_percent_at_577k():
    q = params(28)
    rows = {r.threshold: r for r in evaluate(q, thresholds=[220_000, 577_000]).at_thresholds}
    # "a 30-step disruption inside the 105-step cycle implied by a 220k threshold ... 29%"
    assert rows[220_000].steps_per_cycle == pytest.approx(105.04, abs=0.01)
    assert round(rows[220_000].degraded_share, 2) == 0.29
    # "At a 577k threshold the cycle is 348 steps and the figure falls to 9%."
    assert round(rows[577_000].steps_per_cycle) == 348
    assert round(rows[577_000].degraded_share, 2) == 0.09
    assert DEFAULT_DISRUPTION_STEPS == 30
    for threshold, row in rows.items():
        sim = simulate_cycles(65_588, 1_470, 4_382, 28, threshold, 30)
        assert row.steps_per_cycle == pytest.approx(sim["steps_per_cycle"], rel=1e-3)
        assert row.degraded_share == pytest.approx(sim["degraded_share"], rel=2e-3)
        assert row.mean_window == pytest.approx(sim["mean_window"], rel=1e-3)
        assert row.cost_per_step == pytest.approx(sim["cost_per_productive_step"], rel=1e-3)


def test_seed_mean_window_and_cycle_length_of_section_8():
    q = params(55)
    # "the mean window over a cycle: 482,794 against 189,794 tokens, a factor of 2.54"
    assert float(mean_window(900_000, q)) == 482_794
    assert float(mean_window(314_000, q)) == 189_794
    assert round(float(mean_window(900_000, q) / mean_window(314_000, q)), 2) == 2.54
    # "the 55-step penalty once per 568 steps rather than once per 169"
    assert round(float(steps_per_cycle(900_000, q))) == 568
    assert round(float(steps_per_cycle(314_000, q))) == 169
    # "reaching 900,000 tokens also entails 3.36x more steps of work along the way"
    assert round(float(steps_per_cycle(900_000, q) / steps_per_cycle(314_000, q)), 2) == 3.36


@pytest.mark.parametrize("disruption", [0, 12, 30, 55, 200])
def test_degraded_share_matches_a_step_by_step_session(disruption):
    q = params(28)
    for threshold in (150_000, 314_000, 600_000):
        sim = simulate_cycles(65_588, 1_470, 4_382, 28, threshold, disruption)
        assert float(degraded_share(threshold, q, disruption)) == pytest.approx(
            sim["degraded_share"], abs=2e-3
        )
    # a disruption longer than the cycle covers every step, never more
    assert float(degraded_share(150_000, q, 200)) == 1.0


def test_threshold_rows_carry_the_cycle_figures_even_below_the_floor():
    result = evaluate(params(28), thresholds=[100_000], disruption_steps=12).as_dict()
    (row,) = result["at_thresholds"]
    assert row["below_floor"] and row["cost_per_step"] is None
    assert row["steps_per_cycle"] == pytest.approx((100_000 - 65_588) / 1_470, abs=0.01)
    assert row["mean_window"] == pytest.approx((100_000 + 65_588) / 2, abs=0.1)
    assert row["degraded_share"] == pytest.approx(12 / ((100_000 - 65_588) / 1_470), abs=1e-4)
    with pytest.raises(CycleInputError) as error:
        evaluate(params(28), thresholds=[300_000], disruption_steps=-1)
    assert error.value.field == "disruption_steps"


def test_section_8_1_preset_reproduces_the_25_percent_saving():
    base = params(28)
    bare, tail = compare_scenarios(base, SECTION_8_1)
    assert (bare["threshold"], bare["preserved_tail_tokens"], bare["penalty_steps"]) == (
        600_000,
        0,
        28,
    )
    assert (tail["threshold"], tail["post_compaction_tokens"], tail["penalty_steps"]) == (
        350_000,
        125_588,
        14,
    )
    # "a 350k threshold with a 60k preserved tail costs 25% less per unit of productive
    # work than a 600k threshold with a bare digest"
    assert round(tail["saving_vs_first"], 2) == 0.25
    assert tail["saving_vs_first"] == pytest.approx(0.2468, abs=1e-4)
    assert bare["saving_vs_first"] == 0 and bare["cost_ratio_to_first"] == 1
    # against the step-by-step session, each with its own S and P
    for row in (bare, tail):
        sim = simulate_cycles(
            row["post_compaction_tokens"], 1_470, 4_382, row["penalty_steps"], row["threshold"], 30
        )
        assert row["cost_per_step"] == pytest.approx(sim["cost_per_productive_step"], rel=1e-3)
        assert row["steps_per_cycle"] == pytest.approx(sim["steps_per_cycle"], rel=1e-3)
        assert row["mean_window"] == pytest.approx(sim["mean_window"], rel=1e-3)
        assert row["degraded_share"] == pytest.approx(sim["degraded_share"], rel=2e-3)
    assert (round(bare["cost_per_step"]), round(tail["cost_per_step"])) == (367_839, 277_039)
    assert (round(bare["mean_window"]), round(tail["mean_window"])) == (332_794, 237_794)
    # The tail lands higher, so its cycle is shorter: more of its steps follow a compaction.
    assert (round(bare["degraded_share"], 3), round(tail["degraded_share"], 3)) == (0.083, 0.197)


def test_other_readings_of_section_8_1_bracket_the_seed():
    """The seed gives no P for §8.1; the readings docs/analytics.md lists."""

    def saving(p_bare, p_tail):
        rows = compare_scenarios(
            params(28),
            [Scenario("bare", 600_000, 0, p_bare), Scenario("tail", 350_000, 60_000, p_tail)],
        )
        return rows[1]["saving_vs_first"]

    assert saving(55, 27.5) == pytest.approx(0.2102, abs=1e-4)
    assert saving(145, 55) == pytest.approx(0.2564, abs=1e-4)
    assert saving(28, 28) == pytest.approx(0.1239, abs=1e-4)  # the tail with no fewer steps lost


def test_scenarios_refuse_bad_input_naming_the_scenario():
    base = params(28)
    cases = [
        ([Scenario("low", 60_000, 0, 28)], "scenario 1 (low): threshold 60,000 must be above S"),
        ([*SECTION_8_1, Scenario("neg", 300_000, -1, 28)], "scenario 3 (neg): the preserved tail"),
        ([Scenario("p", 300_000, 0, -2)], "scenario 1 (p): P (penalty steps)"),
        ([Scenario("l", 300_000, 0, 28, -5)], "scenario 1 (l): L (disruption steps)"),
        ([], "give 1 to 10 scenarios"),
    ]
    for scenarios, message in cases:
        with pytest.raises(CycleInputError) as error:
            compare_scenarios(base, scenarios)
        assert error.value.field == "scenarios" and message in str(error.value), message
    # a threshold below a scenario's floor is reported, not refused
    (row,) = compare_scenarios(base, [Scenario("tight", 150_000, 60_000, 28)])
    assert row["below_floor"] and row["cost_per_step"] is None and row["saving_vs_first"] is None
    assert row["reason"].startswith("below floor: T = 150,000")
