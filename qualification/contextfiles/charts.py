"""Chart builders for context-file evaluations. Pure: results in, Plotly figure dict out."""

from __future__ import annotations

import plotly.graph_objects as go

from governance.charts import PALETTE, base_layout, figure_dict
from qualification.contextfiles.analysis.evaluation import EvaluationResults

VERDICT_COLOURS = {
    "helps": "#17663a",
    "equivalent": "#1f5fbf",
    "hurts": "#a4262c",
    "inconclusive": "#8a5300",
}


def _difference_trace(rows, labels, pp, ci95, ci90, colours) -> go.Scatter:
    """Each arm's difference (a diamond in its verdict's colour) with its 95% interval as
    error bars; the hover gives both intervals."""
    lo95, hi95 = ci95
    lo90, hi90 = ci90
    return go.Scatter(
        x=pp,
        y=labels,
        mode="markers",
        marker={"size": 11, "color": colours, "symbol": "diamond"},
        error_x={
            "type": "data",
            "symmetric": False,
            "array": [h - p for h, p in zip(hi95, pp, strict=True)],
            "arrayminus": [p - low for p, low in zip(pp, lo95, strict=True)],
            "thickness": 1.5,
            "width": 6,
            "color": "#4b5563",
        },
        name="difference, 95% CI",
        customdata=[
            [a.comparison.verdict.value, lo95[i], hi95[i], lo90[i], hi90[i]]
            for i, a in enumerate(rows)
        ],
        hovertemplate="%{y}<br>difference %{x:+.1f} pp<br>95% CI %{customdata[1]:+.1f} to "
        "%{customdata[2]:+.1f}<br>90% CI %{customdata[3]:+.1f} to %{customdata[4]:+.1f}"
        "<br>verdict: %{customdata[0]}<extra></extra>",
    )


def _ci90_bar(label: str, low: float, high: float, colour: str, *, first: bool) -> go.Scatter:
    """The thick bar of an arm's 90% interval (the TOST test's)."""
    return go.Scatter(
        x=[low, high],
        y=[label, label],
        mode="lines",
        line={"width": 6, "color": colour},
        opacity=0.45,
        name="90% CI (TOST)",
        showlegend=first,
        hoverinfo="skip",
    )


def forest_plot(results: EvaluationResults) -> dict | None:
    """Each arm's difference from the baseline with 95% (thin) and 90% (thick) intervals,
    the ±Δ equivalence band, zero, and the decision threshold δ."""
    rows = [a for a in results.arms if a.comparison is not None]
    if not rows:
        return None
    rows = list(reversed(rows))  # Plotly draws categories bottom-up; keep the full file on top.
    labels = [
        f"{a.label} (n={a.comparison.n_pairs}) · <b>{a.comparison.verdict.value}</b>" for a in rows
    ]
    pp = [100 * a.comparison.difference for a in rows]
    lo95 = [100 * a.comparison.ci95.low for a in rows]
    hi95 = [100 * a.comparison.ci95.high for a in rows]
    lo90 = [100 * a.comparison.ci90.low for a in rows]
    hi90 = [100 * a.comparison.ci90.high for a in rows]
    colours = [VERDICT_COLOURS[a.comparison.verdict.value] for a in rows]
    margin, delta = 100 * results.margin, 100 * results.delta
    figure = go.Figure()
    figure.add_trace(_difference_trace(rows, labels, pp, (lo95, hi95), (lo90, hi90), colours))
    for i, label in enumerate(labels):
        figure.add_trace(_ci90_bar(label, lo90[i], hi90[i], colours[i], first=i == 0))
    span = max([margin * 1.4, abs(delta) * 1.4] + [abs(v) * 1.1 for v in lo95 + hi95])
    layout = base_layout(
        height=max(320, 110 + 80 * len(rows)),
        xaxis={
            "title": "Success rate difference vs no file (percentage points)",
            "range": [-span, span],
            "zeroline": False,
            "ticksuffix": "",
        },
        yaxis={"automargin": True},
        showlegend=False,
        margin={"l": 20, "r": 20, "t": 30, "b": 50},
        shapes=[
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": -margin,
                "x1": margin,
                "y0": 0,
                "y1": 1,
                "fillcolor": "rgba(31,95,191,0.08)",
                "line": {"width": 0},
                "layer": "below",
            },
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": 0,
                "x1": 0,
                "y0": 0,
                "y1": 1,
                "line": {"color": "#1d232b", "width": 1},
            },
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": delta,
                "x1": delta,
                "y0": 0,
                "y1": 1,
                "line": {"color": PALETTE[2], "width": 1.5, "dash": "dash"},
            },
        ],
        annotations=[
            {
                "x": margin,
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "yanchor": "bottom",
                "text": f"+Δ {margin:.0f}",
                "showarrow": False,
                "font": {"size": 11},
            },
            {
                "x": -margin,
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "yanchor": "bottom",
                "text": f"−Δ {margin:.0f}",
                "showarrow": False,
                "font": {"size": 11},
            },
            {
                "x": delta,
                "y": 0,
                "xref": "x",
                "yref": "paper",
                "yanchor": "top",
                "text": f"δ {delta:+.0f}",
                "showarrow": False,
                "font": {"size": 11, "color": PALETTE[2]},
            },
        ],
    )
    figure.update_layout(**layout)
    return figure_dict(figure)
