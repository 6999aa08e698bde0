"""Seed 001's Figure 9: correction and tool-error rates by step since compaction, each with
its Wilson band. Pure: the section's dict in, a Plotly figure dict out."""

from __future__ import annotations

import plotly.graph_objects as go

from governance.charts import PALETTE, base_layout, figure_dict


def _band_color(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def post_compaction(group: dict) -> dict:
    """One line per rate at each bin's middle step, a shaded 95% Wilson band around it, and
    the correction baseline (steps 60–150) as a dotted line with its own band."""
    fig = go.Figure()
    rows = [row for row in group["bins"]]
    for key, name, color in (
        ("correction", "correction rate", PALETTE[1]),
        ("tool_error", "tool-error rate", PALETTE[0]),
    ):
        shown = [row for row in rows if row[key]["n"]]
        x = [(row["steps"][0] + row["steps"][1]) / 2 for row in shown]
        low = [row[key]["ci"][0] for row in shown]
        high = [row[key]["ci"][1] for row in shown]
        fig.add_trace(
            go.Scatter(
                x=x + x[::-1], y=high + low[::-1], fill="toself", fillcolor=_band_color(color, 0.18),
                line={"width": 0}, name=f"{name}: 95% Wilson band", hoverinfo="skip", legendgroup=key,
            )
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=x, y=[row[key]["rate"] for row in shown], mode="lines+markers", name=name,
                line={"color": color}, legendgroup=key,
                customdata=[[f"{r['steps'][0]}–{r['steps'][1]}", r[key]["n"], r[key]["ci"][0], r[key]["ci"][1]] for r in shown],
                hovertemplate="steps %{customdata[0]}<br>%{y:.1%} [%{customdata[2]:.1%}, %{customdata[3]:.1%}]"
                "<br>n = %{customdata[1]:,}<extra>" + name + "</extra>",
            )
        )  # fmt: skip
    base = group["baseline"]["correction"]
    if base["n"]:
        lo, hi = group["bins"][0]["steps"][0], group["bins"][-1]["steps"][1]
        fig.add_hrect(
            y0=base["ci"][0],
            y1=base["ci"][1],
            fillcolor=_band_color(PALETTE[1], 0.08),
            line_width=0,
        )
        fig.add_trace(
            go.Scatter(
                x=[lo, hi], y=[base["rate"], base["rate"]], mode="lines", name="correction baseline (steps 60–150)",
                line={"color": PALETTE[1], "dash": "dot", "width": 1}, hoverinfo="skip",
            )
        )  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=400,
            xaxis={"title": "steps since the last compaction"},
            yaxis={"title": "share of operator messages / tool results", "tickformat": ".0%", "rangemode": "tozero"},
        )
    )  # fmt: skip
    return figure_dict(fig)
