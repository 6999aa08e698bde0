"""Instruction visibility by turns since delivery: the exact and normalised shares per bin,
each with its 95% Wilson band. Pure: the result's dict in, a Plotly figure dict out."""

from __future__ import annotations

import plotly.graph_objects as go

from governance.charts import PALETTE, base_layout, figure_dict


def _band_color(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def by_turns(result: dict) -> dict:
    """One line per match rule over the bins that have calls with thinking, on an ordinal
    axis labelled with the bins, and a shaded band between each bin's Wilson limits."""
    fig = go.Figure()
    rows = list(enumerate(result["by_turns"]))
    for key, name, color in (
        ("normalised", "normalised match", PALETTE[1]),
        ("exact", "exact match", PALETTE[0]),
    ):
        shown = [(i, row) for i, row in rows if row["n"]]
        x = [i for i, _ in shown]
        low = [row[key]["ci"][0] for _, row in shown]
        high = [row[key]["ci"][1] for _, row in shown]
        fig.add_trace(
            go.Scatter(
                x=x + x[::-1], y=high + low[::-1], mode="lines", fill="toself", fillcolor=_band_color(color, 0.18),
                line={"width": 0}, name=f"{name}: 95% Wilson band", hoverinfo="skip", legendgroup=key,
            )
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=x, y=[row[key]["rate"] for _, row in shown], mode="lines+markers", name=name,
                line={"color": color}, legendgroup=key,
                customdata=[[row["label"], row["n"], row[key]["count"], row[key]["ci"][0], row[key]["ci"][1]] for _, row in shown],
                hovertemplate="turns %{customdata[0]}<br>%{y:.1%} [%{customdata[3]:.1%}, %{customdata[4]:.1%}]"
                "<br>%{customdata[2]:,} of n = %{customdata[1]:,} calls<extra>" + name + "</extra>",
            )
        )  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=360,
            xaxis={
                "title": "turns since delivery (calls of the agent)",
                "tickmode": "array",
                "tickvals": [i for i, _ in rows],
                "ticktext": [row["label"] for _, row in rows],
                "range": [-0.5, len(rows) - 0.5],
            },
            yaxis={"title": "share of calls with visible thinking", "tickformat": ".0%", "range": [0, 1]},
        )
    )  # fmt: skip
    return figure_dict(fig)
