"""The audit's chart: window and active context by band (seed 001 Figure 6). Pure builder."""

from __future__ import annotations

import plotly.graph_objects as go

from governance.charts import TOKEN_AXIS, base_layout, figure_dict


def _errors(rows, key):
    value = [r[key]["value"] for r in rows]
    upper = [(r[key]["ci"][1] - r[key]["value"]) if r[key]["ci"] else 0 for r in rows]
    lower = [(r[key]["value"] - r[key]["ci"][0]) if r[key]["ci"] else 0 for r in rows]
    return value, {"type": "data", "array": upper, "arrayminus": lower, "visible": True}


def active_by_band_figure(results: dict) -> dict:
    """Median window and median active context per band, with their intervals."""
    rows = [r for r in results["active_by_band"] if r["n"]]
    bands = [f"{r['band']} (n = {r['n']})" for r in rows]
    window, window_err = _errors(rows, "window_tokens")
    active, active_err = _errors(rows, "active_tokens")
    figure = go.Figure(
        [
            go.Bar(name="median window", x=bands, y=window, error_y=window_err),
            go.Bar(name="median active context", x=bands, y=active, error_y=active_err),
        ]
    )
    figure.update_layout(
        base_layout(
            barmode="group",
            xaxis={"title": "context band of the step's window"},
            yaxis={"title": "tokens", **TOKEN_AXIS},
        )
    )
    return figure_dict(figure)
