"""Whole-sweep analysis: planted ECLs and knees recovered, every refusal rule, edge cases,
recorded parameters, the production-limit rule and the budget check (all pure)."""

import numpy as np
import pandas as pd
import pytest

from numfmt import tokens as format_tokens
from qualification.analysis.limits import (
    FamilyBasis,
    LimitSpec,
    StageBudget,
    check_budget,
    propose_limit,
)
from qualification.analysis.sweep import AnalysisParams, analyse_sweep, requalification_shifts
from tests.qualification.conftest import STRATA, frame_for

PARAMS = AnalysisParams.for_qualification(threshold=0.85, consequence="medium")


def family(result, name):
    return next(f for f in result.families if f.family == name)


def test_planted_ecl_and_knee_are_recovered():
    curves = {
        "retrieval": [0.97, 0.97, 0.97, 0.97, 0.97],
        "code_change": [0.97, 0.97, 0.97, 0.70, 0.50],
        "aggregation": [0.97, 0.97, 0.60, 0.50, 0.40],
    }
    result = analyse_sweep(frame_for(curves, tasks=60, seed=11), PARAMS)
    code = family(result, "code_change")
    assert (code.ecl_tokens, code.ecl_status) == (32000, "within_range")
    assert code.knee_tokens == 32000
    assert code.ecl_lower95_tokens == 32000
    assert code.p_ecl_at_least[:3] == [1.0, 1.0, 1.0] and code.p_ecl_at_least[3] < 0.01
    assert code.hinge["breakpoint_tokens"] == 32000
    aggregation = family(result, "aggregation")
    assert (aggregation.ecl_tokens, aggregation.knee_tokens) == (16000, 16000)
    retrieval = family(result, "retrieval")
    assert retrieval.ecl_status == "at_least_largest"
    assert retrieval.ecl_text == "≥ 128k (largest tested)"
    assert retrieval.knee_tokens is None
    # Weakest family: aggregation (knee 16k) × 0.75 = 12k → rounded down to 8k.
    assert result.weakest_family == "aggregation"
    assert result.proposed_limit_tokens == 8000
    assert result.status == "ok" and result.reasons == []
    assert result.overall.tasks == 180


def test_margin_follows_the_consequence():
    frame = frame_for({"code_change": [0.97, 0.97, 0.97, 0.97, 0.50]}, tasks=60, seed=12)
    limits = {}
    for consequence in ("low", "medium", "high"):
        params = AnalysisParams.for_qualification(threshold=0.85, consequence=consequence)
        result = analyse_sweep(frame, params)
        limits[consequence] = result.proposed_limit_tokens
        assert result.proposal["consequence"] == consequence
    # Knee 64k: low ×1.0 → 64k; medium ×0.75 → 48k → 32k; high ×0.5 → 32k at 99% with CP.
    assert limits == {"low": 64000, "medium": 32000, "high": 32000}
    high = AnalysisParams.for_qualification(threshold=0.85, consequence="high")
    assert (high.alpha, high.interval_method, high.margin_factor) == (0.01, "beta", 0.5)


def test_all_pass_reports_at_least_the_largest_and_all_fail_below_the_smallest():
    all_pass = analyse_sweep(frame_for({"r": [1.0] * 5}, tasks=40), PARAMS)
    r = all_pass.families[0]
    assert r.ecl_text == "≥ 128k (largest tested)"
    assert r.strata[-1].accuracy == 1.0 and r.strata[-1].ci[0] == pytest.approx(
        40 / (40 + 1.6449**2), abs=1e-3
    )
    assert r.knee_tokens is None and r.kneedle_knee_tokens is None
    assert "separates" in r.gee["note"]
    assert all_pass.proposed_limit_tokens == 64000  # 128k × 0.75 → 96k → 64k

    all_fail = analyse_sweep(frame_for({"r": [0.0] * 5}, tasks=40), PARAMS)
    f = all_fail.families[0]
    assert (f.ecl_tokens, f.ecl_status, f.ecl_text) == (
        None,
        "below_smallest",
        "< 8k (smallest tested)",
    )
    assert all_fail.proposed_limit_tokens is None
    assert "does not meet θ even at the smallest" in all_fail.proposal["reason"]
    assert all_fail.status == "ok"  # a sufficient sweep with a bad result is not a refusal


def test_non_monotone_results_stop_at_the_first_failure():
    # Exact per-task rates: 16k fails θ, 32k passes again.
    rows = []
    for t in range(40):
        for stratum, passes in zip(STRATA, [5, 3, 5, 5, 5], strict=True):
            rows += [
                ("n", f"t{t}", stratum, r, float(r < passes), 1.0, stratum, 100, 1, 1, None, None)
                for r in range(5)
            ]
    frame = pd.DataFrame(rows, columns=[
        "family", "task", "stratum", "repeat", "task_correct", "retrieval_correct",
        "input_tokens", "output_tokens", "model_calls", "tool_calls", "cost", "latency_ms",
    ])  # fmt: skip
    result = analyse_sweep(frame, PARAMS).families[0]
    assert [s.passes for s in result.strata] == [True, False, True, True, True]
    assert (result.ecl_tokens, result.ecl_status) == (8000, "within_range")
    # The isotonic fit pools 16k with the later strata: 0.6 → mean 0.9 over 16k–128k.
    assert result.p_ecl_at_least == [1.0, 1.0, 1.0, 1.0, 1.0]


def test_refusal_too_few_repeats():
    frame = frame_for({"r": [0.95] * 5}, tasks=40, repeats=2)
    result = analyse_sweep(frame, PARAMS)
    r = result.families[0]
    assert result.status == "insufficient"
    assert [x.rule for x in r.refusals] == ["min_repeats"]
    assert r.ecl_tokens is None and r.ecl_status == "refused" and r.ecl_text == "refused"
    assert "at least 3 independent repeats" in r.refusals[0].remedy
    assert r.refusals[0].strata == STRATA
    assert result.proposed_limit_tokens is None


def test_refusal_too_few_tasks_for_theta():
    result = analyse_sweep(frame_for({"r": [1.0] * 5}, tasks=12), PARAMS)
    refusal = result.families[0].refusals[0]
    assert refusal.rule == "min_tasks"
    assert "needs at least 16 tasks" in refusal.message  # Wilson, one-sided 95%, θ = 0.85
    assert "Add at least 4 tasks" in refusal.remedy
    assert result.families[0].ecl_status == "refused"


def test_refusal_unpaired_tasks_names_the_tasks_and_the_gaps():
    frame = frame_for({"r": [0.95] * 5}, tasks=40)
    frame = frame[~((frame.task == "r-007") & (frame.stratum == 64000))]
    result = analyse_sweep(frame, PARAMS)
    refusal = result.families[0].refusals[0]
    assert refusal.rule == "unpaired"
    assert refusal.tasks == ["r-007"] and refusal.strata == [64000]
    assert "r-007 (missing 64k)" in refusal.message
    assert result.families[0].knee is None  # paired tests need pairing


def test_one_refused_family_blocks_the_limit_but_not_the_other_families():
    frame = pd.concat([
        frame_for({"ok": [0.97] * 5}, tasks=40),
        frame_for({"thin": [0.97] * 5}, tasks=40, repeats=1),
    ])  # fmt: skip
    result = analyse_sweep(frame, PARAMS)
    assert family(result, "ok").ecl_status == "at_least_largest"
    assert family(result, "thin").ecl_status == "refused"
    assert result.status == "insufficient"
    assert "thin was refused" in result.proposal["reason"]
    limited = AnalysisParams.for_qualification(
        threshold=0.85, consequence="medium", overrides={"limit_families": ["ok"]}
    )
    assert analyse_sweep(frame, limited).proposed_limit_tokens == 64000


def test_empty_sweep_is_insufficient():
    result = analyse_sweep(frame_for({"r": [0.9] * 5}, tasks=40).iloc[0:0], PARAMS)
    assert result.status == "insufficient"
    assert result.reasons[0].rule == "no_trials"


def test_every_parameter_is_recorded_and_validated():
    params = AnalysisParams.for_qualification(
        threshold=0.9, consequence="low", overrides={"knee_delta": 0.1, "bootstrap_replicates": 500}
    )
    recorded = analyse_sweep(frame_for({"r": [0.97] * 5}, tasks=30), params).params
    assert recorded["knee_delta"] == 0.1 and recorded["bootstrap_replicates"] == 500
    # Low consequence: the limit rule works at 90%, but each stratum is still tested at α = .05.
    assert (recorded["alpha"], recorded["lower_ecl_confidence"]) == (0.05, 0.90)
    assert recorded["margin_factor"] == 1.0
    for key in ("saturation_epsilon", "min_repeats", "kneedle_sensitivity", "bootstrap_seed"):
        assert key in recorded
    with pytest.raises(ValueError, match="unknown parameter 'knee'"):
        AnalysisParams.for_qualification(threshold=0.85, consequence="low", overrides={"knee": 1})
    with pytest.raises(ValueError, match="margin_factor"):
        AnalysisParams.for_qualification(
            threshold=0.85, consequence="low", overrides={"margin_factor": 1.5}
        )
    with pytest.raises(ValueError, match="consequence"):
        AnalysisParams.for_qualification(threshold=0.85, consequence="dire")


@pytest.mark.parametrize(
    ("consequence", "expected"),
    [
        ("low", (0.05, 0.90, "wilson", 1.0)),
        ("medium", (0.05, 0.95, "wilson", 0.75)),
        ("high", (0.01, 0.99, "beta", 0.5)),
    ],
)
def test_consequence_presets_follow_methods_section_7(consequence, expected):
    # METHODS §7: per-stratum one-sided α = .05 (.01 for high); the consequence's confidence
    # (90/95/99%) is the limit rule's lower-ECL confidence, not the stratum tests' α.
    params = AnalysisParams.for_qualification(threshold=0.85, consequence=consequence)
    assert (
        params.alpha,
        params.lower_ecl_confidence,
        params.interval_method,
        params.margin_factor,
    ) == expected


def test_low_consequence_tests_strata_at_95_percent_and_needs_16_tasks_for_085():
    low = AnalysisParams.for_qualification(threshold=0.85, consequence="low")
    # 15 all-pass tasks: at α = .10 (z² = 1.64) 10 tasks would have sufficed; at α = .05 the
    # Wilson bound 15/(15 + 1.645²) = .847 < .85, so θ is out of reach (METHODS §2 table).
    thin = analyse_sweep(frame_for({"r": [1.0] * 5}, tasks=15), low)
    refusal = thin.families[0].refusals[0]
    assert thin.status == "insufficient" and refusal.rule == "min_tasks"
    assert "one-sided 95% Wilson bound" in refusal.message
    assert "needs at least 16 tasks" in refusal.message and "Add at least 1 task" in refusal.remedy
    enough = analyse_sweep(frame_for({"r": [1.0] * 5}, tasks=16), low)
    family_result = enough.families[0]
    assert enough.status == "ok" and family_result.refusals == []
    z = 1.6448536269514722  # one-sided 95%
    assert family_result.strata[0].lower_bound == pytest.approx(16 / (16 + z * z), abs=1e-9)
    assert family_result.ecl_status == "at_least_largest"
    assert enough.proposed_limit_tokens == 128000  # ×1.0, at the 90% lower ECL


def test_high_consequence_minimum_tasks_use_clopper_pearson_at_99_percent():
    high = AnalysisParams.for_qualification(threshold=0.85, consequence="high")
    # All-pass CP lower bound is α^(1/n): 0.01^(1/28) = .848 < .85 ≤ 0.01^(1/29) = .853.
    refusal = analyse_sweep(frame_for({"r": [1.0] * 5}, tasks=28), high).families[0].refusals[0]
    assert refusal.rule == "min_tasks" and "needs at least 29 tasks" in refusal.message
    assert "one-sided 99% Clopper" in refusal.message
    assert analyse_sweep(frame_for({"r": [1.0] * 5}, tasks=29), high).status == "ok"


@pytest.mark.parametrize("value", [0, 1, 2, True, 2.5, "3"])
def test_min_repeats_cannot_be_lowered_below_three(value):
    with pytest.raises(ValueError, match=r"^min_repeats: must be a whole number of at least 3"):
        AnalysisParams.for_qualification(
            threshold=0.85, consequence="medium", overrides={"min_repeats": value}
        )


def test_a_one_repeat_sweep_is_never_analysed_as_ok():
    frame = frame_for({"r": [0.97] * 5}, tasks=40, repeats=1)
    # Parameters built by hand bypass for_qualification; analyse_sweep validates them again.
    with pytest.raises(ValueError, match="min_repeats"):
        analyse_sweep(frame, AnalysisParams(threshold=0.85, min_repeats=1))
    refused = analyse_sweep(frame, PARAMS)
    assert refused.status == "insufficient" and refused.proposed_limit_tokens is None
    assert [r.rule for r in refused.reasons] == ["min_repeats"]


def test_min_repeats_may_be_raised():
    stricter = AnalysisParams.for_qualification(
        threshold=0.85, consequence="medium", overrides={"min_repeats": 5}
    )
    result = analyse_sweep(frame_for({"r": [0.97] * 5}, tasks=40, repeats=4), stricter)
    refusal = result.families[0].refusals[0]
    assert result.status == "insufficient" and refusal.rule == "min_repeats"
    assert "fewer than 5 repeats" in refusal.message
    assert analyse_sweep(frame_for({"r": [0.97] * 5}, tasks=40, repeats=4), PARAMS).status == "ok"


def test_results_are_deterministic_for_a_version():
    frame = frame_for({"a": [0.95, 0.95, 0.9, 0.8, 0.6]}, tasks=40, seed=5)
    first, second = analyse_sweep(frame, PARAMS).as_dict(), analyse_sweep(frame, PARAMS).as_dict()
    assert first == second


def test_four_outcomes_stay_separate():
    result = analyse_sweep(frame_for({"a": [0.9] * 5}, tasks=40, seed=2), PARAMS)
    stratum = result.families[0].strata[0]
    assert stratum.retrieval >= stratum.accuracy  # planted: retrieval succeeds more often
    assert stratum.reliability < stratum.accuracy  # pass^5 ≤ per-trial accuracy
    assert stratum.input_tokens == pytest.approx(8000 * 0.96, rel=0.02)
    assert stratum.cost_per_success > stratum.cost > 0


def test_requalification_shifts_in_doublings():
    before = analyse_sweep(
        frame_for({"c": [0.97, 0.97, 0.97, 0.97, 0.5]}, tasks=60, seed=1), PARAMS
    ).as_dict()
    after = analyse_sweep(
        frame_for({"c": [0.97, 0.97, 0.6, 0.5, 0.4]}, tasks=60, seed=2), PARAMS
    ).as_dict()
    shift = requalification_shifts(after, before)[0]
    assert (shift["knee_before"], shift["knee_after"]) == (64000, 16000)
    assert shift["knee_shift_doublings"] == -2.0
    assert shift["ecl_shift_doublings"] == -2.0


def test_limit_rule_takes_the_weakest_family_and_never_exceeds_a_passing_stratum():
    strata = [8000, 16000, 32000, 64000]
    bases = [
        FamilyBasis("a", ecl_tokens=64000, ecl_status="within_range", lower_ecl_tokens=64000, knee_tokens=None, refused=False),
        FamilyBasis("b", ecl_tokens=16000, ecl_status="within_range", lower_ecl_tokens=32000, knee_tokens=32000, refused=False),
    ]  # fmt: skip
    proposal = propose_limit(bases, strata, consequence="low", margin_factor=1.0, confidence=0.9)
    assert (proposal.tokens, proposal.weakest_family, proposal.basis_kind) == (16000, "b", "ecl")
    assert "largest passing stratum" in proposal.reason


def test_budget_check_verdicts():
    spec = LimitSpec(
        max_context_tokens=32000,
        max_initial_assembly_tokens=24000,
        reserve_tokens=8000,
        reserve_action="restart_from_spec",
        source_limits={"system": 3000, "retrieved_files": 14000},
        stages=[StageBudget("code_generation", "Code generation", 20000, 15000, "split_change")],
    )
    within = check_budget(spec, {"system": 2500, "retrieved_files": 9000, "history": 1000})
    assert (within.verdict, within.total, within.limit, within.reserve_left) == (
        "within",
        12500,
        24000,
        19500,
    )
    assert within.action == "proceed" and within.unbudgeted_sources == ["history"]
    over = check_budget(spec, {"system": 2500, "retrieved_files": 16000})
    assert over.verdict == "over" and over.action == "restart_from_spec"
    assert over.over_sources == [{"source": "retrieved_files", "tokens": 16000, "limit": 14000}]
    stage = check_budget(
        spec, {"system": 2000, "retrieved_files": 13500, "history": 5000}, "code_generation"
    )
    assert (stage.verdict, stage.limit, stage.action, stage.above_target) == (
        "over",
        20000,
        "split_change",
        True,
    )
    with pytest.raises(
        ValueError, match="unknown stage 'deploy'; this limit defines: code_generation"
    ):
        check_budget(spec, {"system": 1}, "deploy")


def test_token_formatting():
    assert [format_tokens(t) for t in (8000, 8192, 128000, 131072, 12500, 1_000_000)] == [
        "8k", "8k", "128k", "128k", "12.5k", "1M",
    ]  # fmt: skip
    assert np.isclose(0.85, PARAMS.threshold)


def test_a_tie_for_weakest_family_goes_to_the_lower_bound_then_the_point_ecl():
    strata = [8000, 16000, 32000, 64000]

    def basis(name, ecl, bound):
        return FamilyBasis(
            name, ecl_tokens=ecl, ecl_status="within_range", lower_ecl_tokens=32000,
            knee_tokens=None, refused=False, lower_bounds={32000: bound},
        )  # fmt: skip

    # "alpha" would win alphabetically; "beta" is closer to failing at the shared 32K basis.
    by_bound = propose_limit(
        [basis("alpha", 64000, 0.90), basis("beta", 64000, 0.86)],
        strata, consequence="low", margin_factor=1.0, confidence=0.9,
    )  # fmt: skip
    assert by_bound.weakest_family == "beta"
    assert "lower bound at 32k is lower (0.860 against 0.900)" in by_bound.weakest_reason
    by_ecl = propose_limit(
        [basis("alpha", 64000, 0.88), basis("beta", 32000, 0.88)],
        strata, consequence="low", margin_factor=1.0, confidence=0.9,
    )  # fmt: skip
    assert by_ecl.weakest_family == "beta" and "point ECL is smaller" in by_ecl.weakest_reason
