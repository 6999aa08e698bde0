"""The fast paths for figures give what Plotly's own helpers give, and the sweep page's figure
cache never serves a figure for other inputs."""

import json

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from governance.charts import add_spanning_lines, figure_dict, figure_with_lines
from qualification import charts, selectors
from qualification.analysis.sweep import AnalysisParams, analyse_sweep
from tests.qualification.conftest import FLAT_THEN_DROP, frame_for

PARAMS = AnalysisParams.for_qualification(threshold=0.85, consequence="medium")
POSITIONS = ["top left", "top right", "bottom left", "bottom right", "left", "right", "top"]


def _sorted(items):
    return sorted(json.dumps(item, sort_keys=True) for item in items)


def _panels():
    fig = make_subplots(rows=2, cols=3, subplot_titles=list("abcdef"), shared_yaxes=True)
    for row in (1, 2):
        for col in (1, 2, 3):
            fig.add_trace(go.Scatter(x=[1, 2], y=[0.2, 0.9]), row=row, col=col)
    return fig


def test_spanning_lines_are_placed_as_plotlys_add_vline_and_add_hline_place_them():
    reference, fast = _panels(), _panels()
    lines = []
    for i, position in enumerate(POSITIONS):
        where = {"row": i % 2 + 1, "col": i % 3 + 1}
        kind = "vline" if i % 2 else "hline"
        at = 1.25 + i / 10
        style = {"color": "#123456", "dash": "dot", "width": 1}
        font = {"size": 10, "color": "#123456"}
        (reference.add_vline if kind == "vline" else reference.add_hline)(
            at, line=style, annotation_text=f"t{i}", annotation_position=position,
            annotation_font=font, **where,
        )  # fmt: skip
        lines.append({"kind": kind, "at": at, "line": style, **where,
                      "annotation": {"text": f"t{i}", "position": position, "font": font}})  # fmt: skip
    expected = figure_dict(reference)["layout"]
    for built in (
        figure_dict(add_spanning_lines(fast, lines))["layout"],
        figure_with_lines(_panels(), lines)["layout"],
    ):
        assert _sorted(built["shapes"]) == _sorted(expected["shapes"])
        assert _sorted(built["annotations"]) == _sorted(expected["annotations"])


def test_sweep_figures_are_cached_by_their_inputs_not_by_identity():
    first = analyse_sweep(frame_for(FLAT_THEN_DROP, tasks=40, seed=3), PARAMS).as_dict()
    second = analyse_sweep(
        frame_for({"code_change": [0.97] * 4 + [0.5]}, tasks=40, seed=4), PARAMS
    ).as_dict()
    failures = [{"stratum_tokens": 8000, "failure_class": "timeout", "n": 2}]
    a = selectors.sweep_figures(result=first, previous_result=None, failures=failures)
    assert a == selectors.sweep_figures(result=first, previous_result=None, failures=failures)
    assert a["decline"] == charts.decline_figure(first)
    b = selectors.sweep_figures(result=second, previous_result=None, failures=failures)
    assert b["decline"] == charts.decline_figure(second) != a["decline"]
    c = selectors.sweep_figures(result=first, previous_result=second, failures=[])
    assert c["decline"] == charts.decline_figure(first, previous=second)
    assert c["failures"] is None and a["failures"] is not None
