"""Paired statistics against published reference values (METHODS.md §4). No database."""

import math
import warnings

import pytest
from statsmodels.stats.weightstats import ttost_paired

from qualification.analysis.paired import (
    Interval,
    PairedTable,
    Verdict,
    compare_paired,
    decide,
    equivalent_by_inclusion,
    mcnemar_test,
    newcombe_paired_ci,
    task_rate_equivalence,
)


def test_newcombe_method_10_reproduces_the_published_cavo_vector():
    # contingencytables (R), Cavo 2012: [[59, 6], [16, 80]] → −0.0621 (−0.1186, −0.0046)
    table = PairedTable(both=59, with_only=6, without_only=16, neither=80)
    ci = newcombe_paired_ci(table, 0.95)
    assert table.difference == pytest.approx(-0.0621, abs=5e-5)
    assert ci.low == pytest.approx(-0.1186, abs=5e-5)
    assert ci.high == pytest.approx(-0.0046, abs=5e-5)


def test_newcombe_handles_no_discordant_pairs():
    # (30, 0, 0, 10): b = c = 0, the 90% interval is ±0.051
    ci = newcombe_paired_ci(PairedTable(30, 0, 0, 10), 0.90)
    assert ci.low == pytest.approx(-0.051, abs=5e-4)
    assert ci.high == pytest.approx(0.051, abs=5e-4)


def test_newcombe_stays_inside_minus_one_one_at_the_extremes():
    ci = newcombe_paired_ci(PairedTable(0, 20, 0, 0), 0.95)
    assert -1 <= ci.low < ci.high <= 1
    assert ci.high == pytest.approx(1.0)


def test_newcombe_is_symmetric_when_the_table_is_mirrored():
    a = newcombe_paired_ci(PairedTable(40, 12, 5, 13))
    b = newcombe_paired_ci(PairedTable(40, 5, 12, 13))
    assert a.low == pytest.approx(-b.high)
    assert a.high == pytest.approx(-b.low)


def test_mcnemar_exact_and_mid_p_on_the_worked_example():
    result = mcnemar_test(PairedTable(25, 8, 2, 5))
    assert result.exact_p == pytest.approx(0.109, abs=5e-4)
    assert result.mid_p == pytest.approx(0.065, abs=5e-4)
    assert result.discordant == 10


@pytest.mark.parametrize("table", [PairedTable(10, 4, 4, 2), PairedTable(10, 0, 0, 2)])
def test_mcnemar_ties_and_no_discordance_give_one(table):
    result = mcnemar_test(table)
    assert result.exact_p == 1.0
    assert result.mid_p == pytest.approx(1.0)


def test_tost_by_inclusion_needs_the_interval_strictly_inside():
    assert equivalent_by_inclusion(Interval(-0.09, 0.09, 0.9, "x"), 0.10)
    assert not equivalent_by_inclusion(Interval(-0.10, 0.05, 0.9, "x"), 0.10)
    assert not equivalent_by_inclusion(Interval(-0.02, 0.11, 0.9, "x"), 0.10)
    with pytest.raises(ValueError):
        equivalent_by_inclusion(Interval(-0.01, 0.01, 0.9, "x"), 0)


def test_tost_on_the_zero_discordance_vector_is_equivalent_at_ten_points():
    # (30,0,0,10): 90% CI ±0.051 lies inside ±0.10 but not inside ±0.05
    result = compare_paired(PairedTable(30, 0, 0, 10), delta=0.05, margin=0.10)
    assert result.equivalent and result.verdict is Verdict.EQUIVALENT
    assert not compare_paired(PairedTable(30, 0, 0, 10), delta=0.05, margin=0.05).equivalent


def test_ttost_paired_zero_variance_is_guarded():
    rates = [1.0, 0.6, 0.8, 1.0, 0.4]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw_p = ttost_paired(
            __import__("numpy").array(rates), __import__("numpy").array(rates), -0.1, 0.1
        )[0]
    assert raw_p == 0 or math.isnan(raw_p)  # the spurious answer the guard exists for
    result = task_rate_equivalence(rates, rates, margin=0.10)
    assert math.isnan(result.p_value)
    assert "Newcombe" in result.method and "zero variance" in result.note
    # 5 tasks only: the task-level Newcombe interval is far too wide for ±10 points
    assert result.equivalent is False


def test_task_rate_equivalence_uses_ttost_when_rates_vary():
    with_rates = [0.8, 1.0, 0.6, 1.0, 0.8, 0.6, 1.0, 0.8] * 5
    without_rates = [0.8, 0.8, 0.6, 1.0, 1.0, 0.6, 1.0, 0.8] * 5
    result = task_rate_equivalence(with_rates, without_rates, margin=0.10)
    assert result.method.startswith("paired TOST")
    assert result.p_value < 0.05 and result.equivalent


@pytest.mark.parametrize(
    ("ci95", "ci90", "expected"),
    [
        ((0.08, 0.20), (0.09, 0.19), Verdict.HELPS),
        ((-0.06, 0.07), (-0.05, 0.06), Verdict.EQUIVALENT),
        ((-0.25, -0.02), (-0.23, -0.04), Verdict.HURTS),
        ((-0.03, 0.22), (-0.01, 0.20), Verdict.INCONCLUSIVE),
        ((0.04, 0.20), (0.05, 0.19), Verdict.INCONCLUSIVE),  # above 0 but not above δ
    ],
)
def test_the_pre_registered_rule_gives_exactly_one_verdict(ci95, ci90, expected):
    decision = decide(
        ci95=Interval(*ci95, 0.95, "x"), ci90=Interval(*ci90, 0.90, "x"), delta=0.05, margin=0.10
    )
    assert decision.verdict is expected
    if expected is Verdict.INCONCLUSIVE:
        assert "not evidence of no effect" in decision.reason
        assert "no effect" not in decision.reason.replace("not evidence of no effect", "")


def test_helps_takes_precedence_over_equivalent_in_the_documented_order():
    decision = decide(
        ci95=Interval(0.06, 0.08, 0.95, "x"),
        ci90=Interval(0.065, 0.075, 0.9, "x"),
        delta=0.05,
        margin=0.10,
    )
    assert decision.verdict is Verdict.HELPS


def test_cavo_table_is_judged_hurts():
    result = compare_paired(PairedTable(59, 6, 16, 80), delta=0.05, margin=0.10)
    assert result.verdict is Verdict.HURTS
    assert result.n_pairs == 161


def test_table_rejects_bad_counts():
    with pytest.raises(ValueError, match="non-negative"):
        PairedTable(-1, 0, 0, 0)
    with pytest.raises(ValueError):
        PairedTable(1.5, 0, 0, 0)
    with pytest.raises(ValueError, match="empty"):
        newcombe_paired_ci(PairedTable(0, 0, 0, 0))


def test_from_outcomes_counts_each_cell():
    table = PairedTable.from_outcomes(
        [(True, True), (True, False), (False, True), (False, False), (True, False)]
    )
    assert table.as_dict() == {"both": 1, "with_only": 2, "without_only": 1, "neither": 1}


def test_a_negative_decision_threshold_is_refused():
    with pytest.raises(ValueError, match="δ must be a difference from 0"):
        compare_paired(PairedTable(50, 2, 4, 44), delta=-0.1, margin=0.1)


def test_a_significant_loss_inside_the_margin_is_hurts_within_margin():
    # Issue 18: D = −5.0 pp (−6.9, −3.2), mid-p 7e-8 was labelled "equivalent".
    result = compare_paired(PairedTable(700, 20, 70, 210), delta=0.05, margin=0.10)
    assert result.difference == pytest.approx(-0.050)
    assert (round(result.ci95.low, 3), round(result.ci95.high, 3)) == (-0.069, -0.032)
    assert result.mcnemar.mid_p < 1e-7
    assert result.verdict is Verdict.HURTS
    assert result.decision.within_margin is True
    assert "within the equivalence bound" in result.decision.reason


def test_a_significant_gain_below_delta_inside_the_margin_is_helps_within_margin():
    decision = decide(
        ci95=Interval(0.01, 0.05, 0.95, "x"),
        ci90=Interval(0.015, 0.045, 0.9, "x"),
        delta=0.05,
        margin=0.10,
    )
    assert (decision.verdict, decision.within_margin) == (Verdict.HELPS, True)


def test_equivalent_only_when_the_95_interval_contains_zero():
    decision = decide(
        ci95=Interval(-0.06, 0.07, 0.95, "x"),
        ci90=Interval(-0.05, 0.06, 0.9, "x"),
        delta=0.05,
        margin=0.10,
    )
    assert (decision.verdict, decision.within_margin) == (Verdict.EQUIVALENT, True)
    outside = decide(
        ci95=Interval(0.08, 0.20, 0.95, "x"),
        ci90=Interval(0.09, 0.19, 0.9, "x"),
        delta=0.05,
        margin=0.10,
    )
    assert (outside.verdict, outside.within_margin) == (Verdict.HELPS, False)
