"""Chart builders are pure: result dicts in, Plotly figure dicts out, with the markers placed."""

import math

import plotly.graph_objects as go

from qualification import charts
from qualification.analysis.sweep import AnalysisParams, analyse_sweep
from tests.qualification.conftest import FLAT_THEN_DROP, frame_for

PARAMS = AnalysisParams.for_qualification(threshold=0.85, consequence="medium")


def result_for(curves, seed):
    return analyse_sweep(frame_for(curves, tasks=40, seed=seed), PARAMS).as_dict()


def test_decline_figure_marks_theta_ecl_knee_and_limit_and_overlays_the_previous():
    current = result_for(FLAT_THEN_DROP, 3)
    previous = result_for({"code_change": [0.97] * 4 + [0.5], "retrieval": [0.97] * 5}, 4)
    fig = charts.decline_figure(current, previous=previous)
    names = [t.get("name") for t in fig["data"]]
    assert names.count("superseded") == 2 and names.count("accuracy") == 2
    lines = fig["layout"]["shapes"]
    horizontal = [s for s in lines if s["y0"] == s["y1"] == 0.85]
    assert len(horizontal) == 2  # θ in both panels
    code = next(f for f in current["families"] if f["family"] == "code_change")
    xs = {round(s["x0"], 6) for s in lines if s["x0"] == s["x1"]}
    assert round(math.log2(code["ecl_tokens"]), 6) in xs
    assert round(math.log2(current["proposed_limit_tokens"]), 6) in xs
    texts = [a["text"] for a in fig["layout"]["annotations"]]
    assert "ECL 32k" in texts and "knee 32k" in texts and "proposed limit 16k" in texts
    axis = fig["layout"]["xaxis"]
    assert axis["ticktext"] == ["8k", "16k", "32k", "64k", "128k"]


def test_add_decline_curve_draws_a_band_and_a_line_on_any_figure():
    family = {
        "family": "code_change",
        "strata": [
            {"tokens": 8000, "accuracy": 0.95, "ci": [0.9, 0.98], "tasks": 40},
            {"tokens": 32000, "accuracy": 0.7, "ci": [0.62, 0.78], "tasks": 40},
        ],
        "ecl_tokens": 8000,
        "knee_tokens": 8000,
    }
    fig = charts.add_decline_curve(go.Figure(), family, theta=0.85, mark_ecl=True, name="lab")
    band, line = fig.data
    assert band.fill == "toself" and band.mode == "lines" and len(band.x) == 4
    assert list(line.y) == [0.95, 0.7] and list(line.x) == [math.log2(8000), math.log2(32000)]
    assert [s.x0 for s in fig.layout.shapes if s.x0 == s.x1] == [math.log2(8000)]


def test_outcome_cost_and_probability_figures_keep_outcomes_apart():
    result = result_for(FLAT_THEN_DROP, 5)
    outcomes = charts.outcomes_figure(result)
    assert [a["text"] for a in outcomes["layout"]["annotations"]] == [
        "Retrieval accuracy", "Task correctness", "Reliability (pass^k)",
        "Input tokens per trial (cost)",
    ]  # fmt: skip
    assert len(outcomes["data"]) == 8  # 4 outcomes × 2 families
    cost = charts.cost_figure(result)
    assert "Cost per successful trial (USD)" in [a["text"] for a in cost["layout"]["annotations"]]
    heat = charts.ecl_probability_figure(result)["data"][0]
    assert heat["y"] == ["code_change", "retrieval"] and len(heat["z"][0]) == 5


def test_failure_figure_stacks_classes_and_skips_unclassified_only_data():
    rows = [
        {"stratum_tokens": 8000, "failure_class": "", "n": 2},
        {"stratum_tokens": 64000, "failure_class": "forgotten_constraint", "n": 7},
        {"stratum_tokens": 64000, "failure_class": "", "n": 1},
    ]
    fig = charts.failure_figure(rows, {"forgotten_constraint": "Forgotten constraint"})
    assert [t["name"] for t in fig["data"]] == ["Forgotten constraint", "not classified"]
    assert fig["data"][0]["y"] == [0, 7] and fig["data"][1]["y"] == [2, 1]
    assert charts.failure_figure(rows[:1], {}) is None


def test_allocation_figure_marks_sources_over_their_limit():
    fig = charts.allocation_figure(
        {"system": 2000, "retrieved_files": 9000}, {"retrieved_files": 8000}, total_limit=12000
    )
    bars = fig["data"][0]
    assert bars["marker"]["color"] == ["#1f5fbf", "#b91c1c"]
    assert fig["data"][1]["x"] == [8000]
