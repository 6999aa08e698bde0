"""Plotly figures for qualification. Pure: analysis result dicts in, figure dicts out.

The x axis is log2(tokens) drawn on a linear axis with the tested strata as ticks, so every
marker (θ, knee, ECL, limit) is placed in the same coordinates as the curve. Other pages can draw
a lab decline curve onto their own figure with `add_decline_curve`.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

import numfmt
from governance.charts import (
    PALETTE,
    TOKEN_AXIS,
    add_spanning_lines,
    base_layout,
    chart_text,
    figure_dict,
    figure_with_lines,
)

MARKER_STYLES = {
    "knee": {"color": "#c2410c", "dash": "dot", "label": "knee"},
    "saturation": {"color": "#15803d", "dash": "dashdot", "label": "saturation"},
    "ecl": {"color": "#1f5fbf", "dash": "solid", "label": "ECL"},
    "limit": {"color": "#b91c1c", "dash": "longdash", "label": "proposed limit"},
}


def _x(tokens) -> float:
    return math.log2(tokens)


def stratum_axis(strata) -> dict:
    """A linear axis in log2(tokens) labelled with the tested strata."""
    strata = sorted({int(s) for s in strata})
    return {
        "tickmode": "array",
        "tickvals": [_x(s) for s in strata],
        "ticktext": stratum_labels(strata),
        "title": {"text": "context tokens (log scale)"},
        "showgrid": True,
        "tickangle": 0,
    }


def stratum_labels(strata: list[int], crowded: float = 0.8) -> list[str]:
    """Tick labels for sorted strata. A stratum less than `crowded` doublings after the one
    before it (128k, 200k) takes its label onto a second line, or the two run together as
    "128k200k"; Plotly's automatic tilt goes by the average spacing, so it does not."""
    labels, previous, lowered = [], None, False
    for tokens in strata:
        lower = previous is not None and not lowered and _x(tokens) - _x(previous) < crowded
        labels.append(("<br>" if lower else "") + numfmt.tokens(tokens))
        previous, lowered = tokens, lower
    return labels


def _rgba(hex_colour: str, alpha: float) -> str:
    value = hex_colour.lstrip("#")
    r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def add_decline_curve(
    fig: go.Figure,
    family: dict,
    *,
    theta: float | None = None,
    row: int | None = None,
    col: int | None = None,
    name: str | None = None,
    color: str = PALETTE[0],
    dash: str = "solid",
    band: bool = True,
    mark_ecl: bool = False,
    mark_knee: bool = False,
    show_legend: bool = True,
    legendgroup: str | None = None,
    lines: list[dict] | None = None,
) -> go.Figure:
    """Draw one family's accuracy by stratum with its interval band onto `fig`.

    `family` has `strata: [{tokens, accuracy, ci: [lo, hi], tasks}]` and optionally
    `ecl_tokens` and `knee_tokens` (an analysis family, or `LabFamily.as_chart_dict()`).
    The x coordinate is log2(tokens); give the figure `stratum_axis(strata)` as its x axis.
    Given `lines`, the θ line and markers are appended to it for `figure_with_lines` instead
    of being added to the figure.
    """
    points = [s for s in family["strata"] if s.get("accuracy") is not None]
    if not points:
        return fig
    name = chart_text(name or family["family"])
    group = legendgroup or name
    xs = [_x(s["tokens"]) for s in points]
    where = {"row": row, "col": col} if row is not None else {}
    if band and all(s["ci"][0] is not None for s in points):
        fig.add_trace(_band_trace(points, xs, color=color, group=group, name=name), **where)
    fig.add_trace(
        _accuracy_trace(
            points, xs, color=color, dash=dash, group=group, name=name, show_legend=show_legend
        ),
        **where,
    )
    marks = _reference_lines(family, where, theta=theta, ecl=mark_ecl, knee=mark_knee)
    if lines is not None:
        lines.extend(marks)
        return fig
    return add_spanning_lines(fig, marks)


def _reference_lines(family: dict, where: dict, *, theta, ecl: bool, knee: bool) -> list[dict]:
    """The θ line, and the family's ECL and knee markers when asked for."""
    lines = []
    if theta is not None:
        lines.append(
            {
                "kind": "hline",
                "at": theta,
                "line": {"color": "#4b5563", "dash": "dash", "width": 1},
                **where,
            }
        )
    wanted = {"ecl": ecl, "knee": knee}
    lines.extend(
        _mark(kind, family[f"{kind}_tokens"], where)
        for kind in ("ecl", "knee")
        if wanted[kind] and family.get(f"{kind}_tokens")
    )
    return lines


def _band_trace(points: list[dict], xs: list[float], *, color, group, name) -> go.Scatter:
    """The interval band of a curve: its upper bounds, then its lower ones backwards."""
    return go.Scatter(
        x=xs + xs[::-1],
        y=[s["ci"][1] for s in points] + [s["ci"][0] for s in points][::-1],
        fill="toself",
        mode="lines",
        fillcolor=_rgba(color, 0.15),
        line={"width": 0},
        hoverinfo="skip",
        showlegend=False,
        legendgroup=group,
        name=f"{name} interval",
    )


def _accuracy_trace(
    points: list[dict], xs: list[float], *, color, dash, group, name, show_legend
) -> go.Scatter:
    return go.Scatter(
        x=xs,
        y=[s["accuracy"] for s in points],
        mode="lines+markers",
        line={"color": color, "dash": dash, "width": 2},
        marker={"size": 7},
        name=name,
        legendgroup=group,
        showlegend=show_legend,
        customdata=[
            [numfmt.tokens(s["tokens"]), s["ci"][0], s["ci"][1], s.get("tasks")] for s in points
        ],
        hovertemplate=(
            "%{customdata[0]}: %{y:.1%} [%{customdata[1]:.1%}, %{customdata[2]:.1%}]"
            "<br>n = %{customdata[3]} tasks<extra>" + name + "</extra>"
        ),
    )


def _mark(kind: str, tokens: int, where: dict, *, annotate: bool = True) -> dict:
    """A vertical marker line for `add_spanning_lines`."""
    style = MARKER_STYLES[kind]
    return {
        "kind": "vline",
        "at": _x(tokens),
        "line": {"color": style["color"], "dash": style["dash"], "width": 1.5},
        "annotation": {
            "text": f"{style['label']} {numfmt.tokens(tokens)}",
            "position": {"knee": "bottom left", "limit": "right"}.get(kind, "top left"),
            "font": {"size": 10, "color": style["color"]},
        }
        if annotate
        else None,
        **where,
    }


def _grid(count: int) -> tuple[int, int]:
    cols = 1 if count == 1 else 2 if count in (2, 4) else 3
    return math.ceil(count / cols), cols


def _family_marks(family: dict, where: dict, *, limit, weakest) -> list[dict]:
    """A family panel's ECL, knee and saturation lines, and the proposed limit (labelled on
    the weakest family's panel only)."""
    marks = [
        _mark(kind, family[f"{kind}_tokens"], where, annotate=kind != "saturation")
        for kind in ("ecl", "knee", "saturation")
        if family.get(f"{kind}_tokens")
    ]
    if limit:
        marks.append(_mark("limit", limit, where, annotate=family["family"] == weakest))
    return marks


def decline_figure(result: dict, *, previous: dict | None = None) -> dict:
    """Accuracy by stratum per family (small multiples) with θ, knee, saturation, ECL and the
    proposed limit; a superseded qualification's curves dashed underneath when given."""
    families = result["families"]
    theta = result["params"]["threshold"]
    rows, cols = _grid(max(len(families), 1))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        shared_yaxes=True,
        subplot_titles=[f["family"] for f in families] or ["no trials"],
        horizontal_spacing=0.05,
        vertical_spacing=0.16 if rows > 1 else 0.1,
    )
    old = {f["family"]: f for f in (previous or {}).get("families", [])}
    limit = result.get("proposed_limit_tokens")
    markers = []
    for index, family in enumerate(families):
        where = {"row": index // cols + 1, "col": index % cols + 1}
        if family["family"] in old:
            add_decline_curve(
                fig,
                old[family["family"]],
                name="superseded",
                color="#6b7280",
                dash="dash",
                band=False,
                show_legend=index == 0,
                legendgroup="superseded",
                **where,
            )
        add_decline_curve(
            fig,
            family,
            theta=theta,
            name="accuracy",
            color=PALETTE[0],
            show_legend=index == 0,
            legendgroup="accuracy",
            lines=markers,
            **where,
        )
        markers.extend(_family_marks(family, where, limit=limit, weakest=result["weakest_family"]))
    axis = stratum_axis(result["strata"]) if result["strata"] else {}
    for index in range(len(families)):
        fig.update_xaxes(
            **{k: v for k, v in axis.items() if k != "title"},
            row=index // cols + 1,
            col=index % cols + 1,
        )
    fig.update_yaxes(range=[0, 1.04], tickformat=".0%", col=1, title_text="task correctness")
    fig.update_layout(
        **base_layout(
            height=300 * rows + 80,
            margin={"l": 70, "r": 20, "t": 50, "b": 60},
            legend={"orientation": "h", "y": -0.08 if rows > 1 else -0.2},
        )
    )
    return figure_with_lines(fig, markers)


OUTCOMES = [
    ("retrieval", "retrieval_ci", "Retrieval accuracy"),
    ("accuracy", "ci", "Task correctness"),
    ("reliability", "reliability_ci", "Reliability (pass^k)"),
    ("input_tokens", "input_tokens_ci", "Input tokens per trial (cost)"),
]


def _outcome_trace(
    family: dict, points: list[dict], key: str, ci_key: str, colour: str, *, show_legend: bool
) -> go.Scatter:
    """One family's line in one outcome panel, with its interval as error bars."""
    return go.Scatter(
        x=[_x(s["tokens"]) for s in points],
        y=[s[key] for s in points],
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [(s[ci_key][1] or s[key]) - s[key] for s in points],
            "arrayminus": [s[key] - (s[ci_key][0] or s[key]) for s in points],
            "thickness": 1,
            "width": 3,
        },
        mode="lines+markers",
        line={"color": colour},
        name=chart_text(family["family"]),
        legendgroup=family["family"],
        showlegend=show_legend,
        hovertemplate="%{y:.3~g}<extra>%{fullData.name}</extra>",
    )


def outcomes_figure(result: dict) -> dict:
    """The four outcomes as separate panels, one line per family, never merged."""
    fig = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=[title for _, _, title in OUTCOMES],
        horizontal_spacing=0.09,
        vertical_spacing=0.16,
    )
    for f_index, family in enumerate(result["families"]):
        colour = PALETTE[f_index % len(PALETTE)]
        for o_index, (key, ci_key, _) in enumerate(OUTCOMES):
            points = [s for s in family["strata"] if s.get(key) is not None]
            if points:
                fig.add_trace(
                    _outcome_trace(family, points, key, ci_key, colour, show_legend=o_index == 0),
                    row=o_index // 2 + 1,
                    col=o_index % 2 + 1,
                )
    axis = stratum_axis(result["strata"]) if result["strata"] else {}
    fig.update_xaxes(**{k: v for k, v in axis.items() if k != "title"})
    for index in range(3):
        fig.update_yaxes(range=[0, 1.04], tickformat=".0%", row=index // 2 + 1, col=index % 2 + 1)
    fig.update_layout(**base_layout(height=620, legend={"orientation": "h", "y": -0.12}))
    return figure_dict(fig)


def _tokens_trace(family: dict, colour: str) -> go.Scatter:
    points = [s for s in family["strata"] if s.get("input_tokens") is not None]
    return go.Scatter(
        x=[_x(s["tokens"]) for s in points],
        y=[s["input_tokens"] + (s.get("output_tokens") or 0) for s in points],
        mode="lines+markers",
        line={"color": colour},
        name=chart_text(family["family"]),
        legendgroup=family["family"],
        hovertemplate="%{y:,.0f} tokens<extra>%{fullData.name}</extra>",
    )


def _cost_trace(family: dict, colour: str) -> go.Scatter:
    costed = [s for s in family["strata"] if s.get("cost_per_success") is not None]
    return go.Scatter(
        x=[_x(s["tokens"]) for s in costed],
        y=[s["cost_per_success"] for s in costed],
        mode="lines+markers",
        line={"color": colour},
        name=chart_text(family["family"]),
        legendgroup=family["family"],
        showlegend=False,
        hovertemplate="$%{y:.4f} per success<extra>%{fullData.name}</extra>",
    )


def cost_figure(result: dict) -> dict:
    """Cost against stratum: tokens per trial and, where recorded, cost per successful trial."""
    has_cost = any(
        s.get("cost_per_success") is not None for f in result["families"] for s in f["strata"]
    )
    titles = ["Tokens per trial (input + output)"]
    if has_cost:
        titles.append("Cost per successful trial (USD)")
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles, horizontal_spacing=0.1)
    for index, family in enumerate(result["families"]):
        colour = PALETTE[index % len(PALETTE)]
        fig.add_trace(_tokens_trace(family, colour), row=1, col=1)
        if has_cost:
            fig.add_trace(_cost_trace(family, colour), row=1, col=2)
    axis = stratum_axis(result["strata"]) if result["strata"] else {}
    fig.update_xaxes(**axis)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(**TOKEN_AXIS, row=1, col=1)
    if has_cost:
        fig.update_yaxes(tickprefix="$", row=1, col=2)
    # The legend goes below the axis titles: above the plots it would cover the subplot titles.
    fig.update_layout(
        **base_layout(
            height=420,
            margin={"l": 60, "r": 20, "t": 50, "b": 110},
            legend={"orientation": "h", "x": 0, "y": -0.3, "xanchor": "left", "yanchor": "top"},
        )
    )
    return figure_dict(fig)


def ecl_probability_figure(result: dict) -> dict:
    """P(ECL ≥ L) per family and stratum from the task bootstrap, as a heatmap."""
    families = [f for f in result["families"] if f.get("p_ecl_at_least")]
    strata = result["strata"]
    z = [f["p_ecl_at_least"] for f in families]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[numfmt.tokens(s) for s in strata],
            y=[f["family"] for f in families],
            zmin=0,
            zmax=1,
            colorscale=[[0, "#f3f4f6"], [0.95, "#93c5fd"], [1, "#1f5fbf"]],
            text=[[f"{p:.2f}" for p in row] for row in z],
            texttemplate="%{text}",
            hovertemplate="P(ECL ≥ %{x}) = %{z:.3f}<extra>%{y}</extra>",
            colorbar={"title": {"text": "P"}, "tickformat": ".0%"},
        )
    )
    fig.update_layout(
        **base_layout(
            height=110 + 42 * max(len(families), 1),
            xaxis={"title": {"text": "context tokens"}, "type": "category"},
            yaxis={"autorange": "reversed"},
            margin={"l": 130, "r": 20, "t": 20, "b": 50},
        )
    )
    return figure_dict(fig)


def allocation_figure(allocation: dict, source_limits: dict, *, total_limit: int) -> dict:
    """An assembly's tokens by source, with each source's limit and the assembly limit."""
    sources = list(allocation)
    colours = [
        "#b91c1c" if s in source_limits and allocation[s] > source_limits[s] else PALETTE[0]
        for s in sources
    ]
    fig = go.Figure(
        go.Bar(
            x=[allocation[s] for s in sources],
            y=sources,
            orientation="h",
            marker={"color": colours},
            name="tokens",
            hovertemplate="%{y}: %{x:,} tokens<extra></extra>",
        )
    )
    limited = [s for s in sources if s in source_limits]
    if limited:
        fig.add_trace(
            go.Scatter(
                x=[source_limits[s] for s in limited],
                y=limited,
                mode="markers",
                marker={
                    "symbol": "line-ns-open",
                    "size": 22,
                    "color": "#111827",
                    "line": {"width": 3},
                },
                name="source limit",
                hovertemplate="%{y} limit: %{x:,}<extra></extra>",
            )
        )
    fig.update_layout(
        **base_layout(
            height=120 + 34 * len(sources),
            xaxis={
                **TOKEN_AXIS,
                "title": {
                    "text": f"tokens (assembly total {sum(allocation.values()):,} of {total_limit:,})"
                },
            },
            yaxis={"autorange": "reversed"},
            margin={"l": 140, "r": 20, "t": 20, "b": 60},
        )
    )
    return figure_dict(fig)


def failure_figure(rows: list[dict], labels: dict[str, str]) -> dict | None:
    """Failed trials by stratum, stacked by failure class: what breaks as context grows."""
    if not any(r["failure_class"] for r in rows):
        return None
    strata = sorted({r["stratum_tokens"] for r in rows})
    classes = sorted({r["failure_class"] for r in rows}, key=lambda c: (c == "", c))
    counts = {(r["stratum_tokens"], r["failure_class"]): r["n"] for r in rows}
    fig = go.Figure()
    for index, name in enumerate(classes):
        fig.add_trace(
            go.Bar(
                x=[numfmt.tokens(s) for s in strata],
                y=[counts.get((s, name), 0) for s in strata],
                name=chart_text(labels.get(name, name)) if name else "not classified",
                marker={"color": "#d1d5db" if not name else PALETTE[index % len(PALETTE)]},
                hovertemplate="%{x}: %{y} failed trials<extra>%{fullData.name}</extra>",
            )
        )
    fig.update_layout(
        **base_layout(
            barmode="stack",
            height=360,
            # Right of the plot, one class per row: above it, a long list wrapped onto the axes.
            legend={"orientation": "v", "x": 1.02, "y": 1, "xanchor": "left", "yanchor": "top"},
            margin={"l": 60, "r": 220, "t": 30, "b": 50},
            xaxis={"title": {"text": "context tokens"}, "type": "category"},
            yaxis={"title": {"text": "failed trials"}},
        )
    )
    return figure_dict(fig)


def decline_thumbnail(result: dict, *, limit_tokens: int | None) -> dict:
    """A small decline curve for a limit's review: every family on one axis, θ, the weakest
    family's knee and ECL, and the limit's maximum context against them."""
    fig = go.Figure()
    weakest = result.get("weakest_family")
    for index, family in enumerate(result["families"]):
        add_decline_curve(
            fig,
            family,
            theta=result["params"]["threshold"] if index == 0 else None,
            name=family["family"],
            color=PALETTE[index % len(PALETTE)],
            band=family["family"] == weakest,
            mark_knee=family["family"] == weakest,
        )
    if limit_tokens:
        style = MARKER_STYLES["limit"]
        fig.add_vline(
            x=_x(limit_tokens),
            line={"color": style["color"], "dash": style["dash"], "width": 2},
            annotation_text=f"this limit {numfmt.tokens(limit_tokens)}",
            annotation_position="bottom left",
            annotation_font={"size": 11, "color": style["color"]},
        )
    axis = stratum_axis(result["strata"]) if result["strata"] else {}
    fig.update_layout(
        **base_layout(
            height=260,
            margin={"l": 50, "r": 15, "t": 30, "b": 40},
            xaxis={**axis, "title": {"text": "context tokens (log scale)", "font": {"size": 11}}},
            yaxis={"range": [0, 1.04], "tickformat": ".0%"},
            legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
            showlegend=True,
        )
    )
    return figure_dict(fig)
