"""Plotly figures for the analytics pages. Pure: analysis results (plain dicts) in, figure dicts out."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

import numfmt
from governance.charts import PALETTE, TOKEN_AXIS, base_layout, chart_text, figure_dict, log_axis

BAD = "#a4262c"
MUTED = "#8a96a3"


def cost_curve(section: dict) -> dict:
    x = section.get("reached") or section["bands"]  # results cached before `reached` existed
    y, n = section["median_cost"], section["agents"]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x, y=y, mode="markers", name="median cumulative cost", marker={"size": 8},
            customdata=n, hovertemplate="reaching %{x:,} tokens<br>median %{y:,.0f} tokens billed<br>n = %{customdata} agents<extra></extra>",
        )
    )  # fmt: skip
    fit = section.get("fit")
    if fit and x:
        grid = np.geomspace(min(x), max(x), 50)
        fig.add_trace(
            go.Scatter(
                x=grid, y=np.exp(fit["intercept"]) * grid ** fit["exponent"], mode="lines", name=f"fit: cost ∝ C^{fit['exponent']:.2f}",
                line={"dash": "dash"}, hoverinfo="skip",
            )
        )  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=380,
            xaxis={"title": "context reached (tokens, log)", **log_axis(x)},
            yaxis={"title": "cumulative tokens billed (log)", **log_axis(y)},
        )
    )
    return figure_dict(fig)


def growth(section: dict) -> dict:
    rows = section["rows"]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=[r["band"] for r in rows], y=[r["median"] for r in rows], name="median", customdata=[r["n"] for r in rows],
            hovertemplate="from %{x:,} tokens<br>median +%{y:,.0f} tokens/step<br>n = %{customdata} steps<extra></extra>",
            marker={"color": PALETTE[0]}, width=section["band"] * 0.8, offset=0,
        )
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=[r["band"] + section["band"] * 0.4 for r in rows],
            y=[r["mean"] for r in rows],
            mode="markers",
            name="mean",
            marker={"color": PALETTE[1]},
        )
    )
    fig.update_layout(
        **base_layout(
            height=340,
            xaxis={"title": "context before the step (band)", **TOKEN_AXIS},
            yaxis={"title": "context added per step (tokens)", **TOKEN_AXIS},
        )
    )
    return figure_dict(fig)


def amplification(section: dict) -> dict:
    rows = section["rows"]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[r["band"] for r in rows], y=[r["ratio"] for r in rows], mode="lines+markers", name="tokens read ÷ output",
            customdata=[r["n"] for r in rows], hovertemplate="band %{x:,}<br>%{y:,.3~r}×<br>n = %{customdata} calls<extra></extra>",
        )
    )  # fmt: skip
    if section.get("minimum_band") is not None:
        low = next(r for r in rows if r["band"] == section["minimum_band"])
        fig.add_trace(go.Scatter(x=[low["band"]], y=[low["ratio"]], mode="markers+text", text=[f"minimum {numfmt.ratio(low['ratio'])}"], textposition="top right",
                                 marker={"size": 13, "color": BAD, "symbol": "diamond"}, name="minimum"))  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=340,
            xaxis={"title": "context band (tokens)", **TOKEN_AXIS},
            yaxis={
                "title": "tokens read per output token",
                **log_axis([r["ratio"] for r in rows], numfmt.ratio),
            },
        )
    )
    return figure_dict(fig)


def steps(section: dict) -> dict:
    fig = go.Figure()
    counts_seen: list[float] = []
    for key, color in (("main", PALETTE[0]), ("subagents", PALETTE[1])):
        data = section[key]
        if not data.get("histogram"):
            continue  # no agents, or too few for a distribution
        values = np.array(data["histogram"])
        edges = np.unique(np.geomspace(1, max(values.max(), 2) + 1, 30).astype(int))
        counts, _ = np.histogram(values, bins=edges)
        counts_seen += [float(edges[0]), float(edges[-1])]
        fig.add_trace(
            go.Bar(
                x=edges[:-1],
                y=counts.tolist(),
                width=np.diff(edges),  # each bar spans its bin, as wide on the log axis
                offset=0,
                name=f"{data['group']} (n = {data['agents']})",
                marker={"color": color},
                opacity=0.75,
            )
        )
        # One row of labels per statistic, so a median and a p90 close together stay apart.
        # Shapes on a log axis take data values, annotations take log10 of them.
        for row, (label, value) in enumerate(
            (("median", data["median"]), ("p90", data["p90"]), ("p99", data["p99"]))
        ):
            if value is None:
                continue
            fig.add_vline(x=value, line={"color": color, "dash": "dot", "width": 1})
            fig.add_annotation(
                x=float(np.log10(value)), xref="x", xanchor="left", y=1 - 0.08 * row,
                yref="paper", yanchor="top", showarrow=False, font={"size": 10, "color": color},
                text=f"{label} {numfmt.count(value)}",
            )  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=360,
            barmode="overlay",
            xaxis={"title": "API calls per agent (log)", **log_axis(counts_seen, numfmt.count)},
            yaxis={"title": "agents"},
        )
    )
    return figure_dict(fig)


def compactions(section: dict, *, max_bins: int = 60) -> dict:
    """Context before and after each compaction, binned here on shared edges: at 1M calls the
    raw values (25k each) made a 500 KiB page and cost more to build than the rest of it."""
    pre = np.asarray(section["pre"], dtype=float)
    post = np.asarray(section["post"], dtype=float)
    values = np.concatenate([pre, post])
    values = values[np.isfinite(values)]
    edges = np.histogram_bin_edges(values, bins="auto") if len(values) else np.array([0.0, 1.0])
    if len(edges) > max_bins + 1:
        edges = np.linspace(edges[0], edges[-1], max_bins + 1)
    # Lists, not arrays: figure_dict would write arrays as base64 typed arrays.
    centres, widths = ((edges[:-1] + edges[1:]) / 2).tolist(), np.diff(edges).tolist()
    ranges = np.stack([edges[:-1], edges[1:]], axis=1).tolist()
    fig = go.Figure()
    for name, data, colour in (
        (f"before (n = {section['n_pre']})", pre, PALETTE[1]),
        (f"after (n = {section['n_post']})", post, PALETTE[0]),
    ):
        counts, _ = np.histogram(data[np.isfinite(data)], bins=edges)
        fig.add_trace(
            go.Bar(
                x=centres,
                y=counts.tolist(),
                width=widths,
                name=name,
                opacity=0.7,
                marker={"color": colour},
                customdata=ranges,
                hovertemplate="%{customdata[0]:,.0f}–%{customdata[1]:,.0f} tokens: "
                "%{y:,} compactions<extra>%{fullData.name}</extra>",
            )
        )
    fig.update_layout(
        **base_layout(
            height=320,
            barmode="overlay",
            bargap=0,
            xaxis={"title": "context (tokens)", **TOKEN_AXIS},
            yaxis={"title": "compactions"},
        )
    )
    return figure_dict(fig)


def cycle(
    model: dict, *, tail: dict | None = None, label: str = "f(T)", mark: list[float] | None = None
) -> dict:
    fig = go.Figure()
    low, high = model["within_10pct"]
    fig.add_vrect(
        x0=low,
        x1=high,
        fillcolor="#15803d",
        opacity=0.10,
        line_width=0,
        annotation_text="within 10% of optimum",
        annotation_position="top left",
    )
    fig.add_vline(
        x=model["floor_threshold"],
        line={"color": BAD, "dash": "dash"},
        annotation_text=f"floor {numfmt.tokens(model['floor_threshold'])}",
        annotation_position="bottom right",
    )
    curve = np.array(model["curve"])
    fig.add_trace(go.Scatter(x=curve[:, 0], y=curve[:, 1], mode="lines", name=label, line={"color": PALETTE[0], "width": 3},
                             hovertemplate="T = %{x:,.0f}<br>%{y:,.0f} tokens per productive step<extra></extra>"))  # fmt: skip
    fig.add_trace(go.Scatter(x=[model["optimum_threshold"]], y=[model["optimum_cost_per_step"]], mode="markers+text", name="optimum T*",
                             text=[f"T* = {numfmt.tokens(model['optimum_threshold'])}"], textposition="bottom center", marker={"size": 12, "color": PALETTE[0]}))  # fmt: skip
    if tail:
        tail_curve = np.array(tail["model"]["curve"])
        fig.add_trace(go.Scatter(x=tail_curve[:, 0], y=tail_curve[:, 1], mode="lines", name=f"preserved {numfmt.tokens(tail['tail_tokens'])} tail (P = {tail['penalty_steps']:.0f})",
                                 line={"color": PALETTE[2], "dash": "dash", "width": 2}))  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=[tail["model"]["optimum_threshold"]],
                y=[tail["model"]["optimum_cost_per_step"]],
                mode="markers",
                name="tail optimum",
                marker={"size": 10, "color": PALETTE[2]},
            )
        )
    for threshold in mark or []:
        fig.add_vline(
            x=threshold,
            line={"color": MUTED, "width": 1},
            annotation_text=numfmt.tokens(threshold),
            # At the foot: at the top they ran into "within 10% of optimum".
            annotation_position="bottom right",
            annotation_font_size=10,
        )
    top = float(np.nanmin(curve[:, 1])) * 3 if len(curve) else None
    fig.update_layout(
        **base_layout(
            height=400,
            xaxis={"title": "compaction threshold T (tokens)", **TOKEN_AXIS},
            yaxis={
                "title": "tokens per productive step",
                "range": [0, top] if top else None,
                **TOKEN_AXIS,
            },
        )
    )
    return figure_dict(fig)


def degraded_share(curve: list[tuple[float, float]], rows: list[dict], disruption: dict) -> dict:
    """The share of steps inside the post-compaction degraded region, min(L, n)/n, against
    the threshold, with the table's thresholds marked (seed 001 §7.3)."""
    fig = go.Figure()
    points = np.array(curve) if curve else np.zeros((0, 2))
    fig.add_trace(go.Scatter(x=points[:, 0], y=points[:, 1], mode="lines", name=f"L = {disruption['steps']:g} steps ({disruption['source']})",
                             line={"color": PALETTE[1], "width": 3},
                             hovertemplate="T = %{x:,.0f}<br>%{y:.1%} of steps degraded<extra></extra>"))  # fmt: skip
    if rows:
        # Values in the table and on hover: text labels collide when shares coincide (L = 0).
        fig.add_trace(go.Scatter(x=[r["threshold"] for r in rows], y=[r["degraded_share"] for r in rows], mode="markers",
                                 marker={"size": 9, "color": PALETTE[0]}, name="the table's thresholds",
                                 hovertemplate="T = %{x:,.0f}<br>%{y:.1%} of steps degraded<extra></extra>"))  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=340,
            xaxis={"title": "compaction threshold T (tokens)", **TOKEN_AXIS},
            yaxis={"title": "steps inside the degraded region", "tickformat": ".0%", "range": [0, 1.05]},
        )
    )  # fmt: skip
    return figure_dict(fig)


def scenarios(rows: list[dict]) -> dict:
    """Cost per productive step of each fixed scenario (seed 001 §8.1), the first the reference."""
    shown = [r for r in rows if r["cost_per_step"] is not None]
    names = [chart_text(r["name"]) for r in shown]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=[r["cost_per_step"] for r in shown], y=names, orientation="h", name="tokens per productive step",
                         marker={"color": [PALETTE[i % len(PALETTE)] for i in range(len(shown))]},
                         text=[numfmt.tokens(r["cost_per_step"]) + ("" if i == 0 else f" ({numfmt.signed_percent(-r['saving_vs_first'])} vs {names[0]})")
                               for i, r in enumerate(shown)], textposition="auto",
                         hovertemplate="%{y}<br>%{x:,.0f} tokens per productive step<extra></extra>"))  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=120 + 50 * len(shown),
            xaxis={"title": "tokens per productive step", **TOKEN_AXIS},
            yaxis={"autorange": "reversed"},
            showlegend=False,
        )
    )
    return figure_dict(fig)


def sensitivity(
    rows: list[dict], measured_p: float | None = None, p_ci=None, t_star_ci=None
) -> dict:
    p = [r["penalty_steps"] for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=p + p[::-1], y=[r["within_10pct"][1] for r in rows] + [r["within_10pct"][0] for r in rows][::-1], fill="toself",
                             fillcolor="rgba(21,128,61,0.12)", line={"width": 0}, name="within 10%", hoverinfo="skip"))  # fmt: skip
    fig.add_trace(go.Scatter(x=p, y=[r["optimum_threshold"] for r in rows], mode="lines+markers", name="optimum T*",
                             hovertemplate="P = %{x}<br>T* = %{y:,.0f}<extra></extra>"))  # fmt: skip
    if measured_p is not None:
        error = None
        if p_ci:
            error = {
                "type": "data",
                "symmetric": False,
                "array": [p_ci[1] - measured_p],
                "arrayminus": [measured_p - p_ci[0]],
            }
        y = next((r["optimum_threshold"] for r in rows if r["penalty_steps"] == measured_p), None)
        if y is None:
            y = float(np.interp(measured_p, p, [r["optimum_threshold"] for r in rows]))
        fig.add_trace(
            go.Scatter(
                x=[measured_p],
                y=[y],
                mode="markers",
                error_x=error,
                name="measured P (95% CI)",
                marker={"size": 12, "color": BAD},
            )
        )
    fig.update_layout(
        **base_layout(
            height=360,
            xaxis={"title": "rediscovery penalty P (steps)"},
            yaxis={"title": "optimal threshold T* (tokens)", **TOKEN_AXIS},
        )
    )
    return figure_dict(fig)


def coverage(section: dict) -> dict:
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=section["grid"], y=section["coverage"], mode="lines+markers", name="coverage",
                             hovertemplate="W = %{x:,}<br>%{y:.1%} of repeat references<extra></extra>"))  # fmt: skip
    if section.get("asymptote") is not None:
        fig.add_hline(
            y=section["asymptote"],
            line={"dash": "dash", "color": MUTED},
            annotation_text=f"asymptote {numfmt.percent(section['asymptote'])}",
        )
    if section.get("best_per_cost"):
        best = section["best_per_cost"]
        value = section["coverage"][section["grid"].index(best)]
        fig.add_trace(go.Scatter(x=[best], y=[value], mode="markers+text", text=[f"best per cost {numfmt.tokens(best)}"], textposition="bottom right",
                                 marker={"size": 12, "color": BAD}, name="best coverage per unit of cost"))  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=360,
            xaxis={"title": "window W (tokens, log)", **log_axis(section["grid"])},
            yaxis={"title": "repeat references within W", "tickformat": ".0%", "range": [0, 1]},
        )
    )
    return figure_dict(fig)


def incidents(section: dict) -> dict:
    fig = go.Figure()
    days = section["days"]
    others = np.array(section["day_totals"], dtype=float)
    for index, row in enumerate(section["top"]):
        per_day = np.array(row["per_day"], dtype=float)
        others = others - per_day
        label = f"{row.get('label', row['agent'])}{' (fork)' if row.get('start_kind') == 'fork' else ''}"
        fig.add_trace(
            go.Bar(
                x=days,
                y=per_day,
                name=chart_text(label[:40]),
                marker={"color": PALETTE[index % len(PALETTE)]},
            )
        )
    fig.add_trace(
        go.Bar(
            x=days, y=np.maximum(others, 0), name="all other agents", marker={"color": "#c5ccd5"}
        )
    )
    fig.update_layout(
        **base_layout(
            height=400,
            barmode="stack",
            xaxis={"title": "day (UTC)"},
            yaxis={"title": "tokens billed", **TOKEN_AXIS},
        )
    )
    return figure_dict(fig)
