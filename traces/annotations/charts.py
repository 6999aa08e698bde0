"""Plotly figures for the trace viewer and the divergence aggregates. Pure: data in, dict out.

Only numbers and our own class labels go into figures (hover labels are rendered by Plotly,
not escaped by Django), never transcript text or notes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

import numfmt
from governance.charts import PALETTE, TOKEN_AXIS, base_layout, figure_dict
from qualification.charts import MARKER_STYLES, add_decline_curve, stratum_axis
from traces.annotations.analysis.aggregates import BandTable, Distribution, LabComparison
from traces.annotations.analysis.classes import CLASS_SLUGS, class_label
from traces.charts import downsample_max

STRIP_MAX_POINTS = 6000
CLASS_COLOURS = dict(
    zip(
        CLASS_SLUGS,
        [
            "#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c",
            "#0e7490", "#a16207", "#be185d", "#4d7c0f", "#4b5563",
        ],
        strict=True,
    )
)  # fmt: skip


@dataclass(frozen=True)
class StripMark:
    call_index: int
    context: int
    failure_class: str
    final: bool


def _strip_line(index: Sequence[int], context: Sequence[int]) -> tuple[list, list]:
    """The strip's points: downsampled to STRIP_MAX_POINTS peaks, or all of them with the line
    broken where other agents' calls interleave (gaps in the session index)."""
    if len(index) > STRIP_MAX_POINTS:
        return downsample_max(list(index), list(context), STRIP_MAX_POINTS)
    x, y = list(index), list(context)
    gx: list = []
    gy: list = []
    for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
        if i and xi - x[i - 1] > 1:
            gx.append(None)
            gy.append(None)
        gx.append(xi)
        gy.append(yi)
    return gx, gy


def _compaction_lines(compactions: Sequence[int], *, peak: int) -> go.Scatter:
    """One dotted vertical line per compaction, from 0 to the strip's peak."""
    xs: list = []
    ys: list = []
    for c in compactions:
        xs += [c, c, None]
        ys += [0, peak, None]
    return go.Scatter(
        x=xs,
        y=ys,
        mode="lines",
        line={"color": "#a4262c", "width": 1, "dash": "dot"},
        name="compaction",
        hoverinfo="skip",
    )


def _add_mark_traces(fig: go.Figure, marks: Sequence[StripMark]) -> None:
    """One trace of markers per failure class marked: a star for a final mark, else a diamond."""
    for slug in CLASS_SLUGS:
        chosen = [m for m in marks if m.failure_class == slug]
        if not chosen:
            continue
        fig.add_trace(
            go.Scatter(
                x=[m.call_index for m in chosen],
                y=[m.context for m in chosen],
                mode="markers",
                name=class_label(slug),
                marker={
                    "symbol": ["star" if m.final else "diamond" for m in chosen],
                    "size": [14 if m.final else 10 for m in chosen],
                    "color": CLASS_COLOURS[slug],
                    "line": {"width": 1, "color": "#ffffff"},
                },
                hovertemplate="call %{x}: " + class_label(slug) + "<extra></extra>",
            )
        )


def _window_shape(window: tuple[int, int]) -> dict:
    """The shading of the calls shown in the step list."""
    return {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": window[0] - 0.5,
        "x1": window[1] + 0.5,
        "y0": 0,
        "y1": 1,
        "fillcolor": "rgba(31,95,191,0.08)",
        "line": {"width": 0},
        "layer": "below",
        "name": "window",
    }


def strip_figure(
    index: Sequence[int],
    context: Sequence[int],
    *,
    marks: Sequence[StripMark] = (),
    compactions: Sequence[int] = (),
    window: tuple[int, int] | None = None,
) -> dict:
    """Context per call as a thin strip. x is the call index (session order), so a click maps
    straight to a step. `window` shades the calls shown in the list."""
    x, y = _strip_line(index, context)
    trace = go.Scattergl if len(x) > 1500 else go.Scatter
    fig = go.Figure()
    fig.add_trace(
        trace(
            x=x,
            y=y,
            mode="lines" if len(x) > 300 else "lines+markers",
            line={"width": 1.5, "color": PALETTE[0]},
            marker={"size": 4},
            name="context",
            hovertemplate="call %{x}<br>context %{y:,} tokens<extra></extra>",
        )
    )
    if compactions:
        fig.add_trace(_compaction_lines(compactions, peak=max(context) if context else 0))
    _add_mark_traces(fig, marks)
    shapes = [_window_shape(window)] if window is not None else []
    fig.update_layout(
        **base_layout(
            height=170,
            margin={"l": 55, "r": 10, "t": 26 if (marks or compactions) else 8, "b": 30},
            showlegend=bool(marks) or bool(compactions),
            legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom",
                    "font": {"size": 11}},
            xaxis={"title": None, "tickformat": "d"},
            yaxis={"title": None, "rangemode": "tozero", **TOKEN_AXIS},
            shapes=shapes,
            hovermode="x",
        )
    )  # fmt: skip
    data = figure_dict(fig)
    data["config"] = {"displayModeBar": False}
    return data


def band_figure(table: BandTable) -> dict:
    """Stacked counts of failure classes by context band."""
    fig = go.Figure()
    labels = [b.label for b in table.bands]
    totals = table.class_totals()
    for slug in table.classes:
        if not totals.get(slug):
            continue
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[b.counts[slug] for b in table.bands],
                name=class_label(slug),
                marker={"color": CLASS_COLOURS[slug]},
                customdata=[[b.n] for b in table.bands],
                hovertemplate="%{x}: %{y} of %{customdata[0]}<extra>"
                + class_label(slug)
                + "</extra>",
            )
        )
    fig.update_layout(
        **base_layout(
            barmode="stack",
            height=360,
            xaxis={"title": "context at the divergent call (tokens)"},
            yaxis={"title": "runs", "tickformat": "d", "rangemode": "tozero"},
            # Right of the plot, one class per row: below it, the legend covered the axis title.
            legend={"orientation": "v", "x": 1.02, "y": 1, "xanchor": "left", "yanchor": "top"},
            margin={"l": 60, "r": 20, "t": 20, "b": 50},
        )
    )
    return figure_dict(fig)


def distribution_figure(contexts: Sequence[int], dist: Distribution) -> dict:
    """The empirical CDF of the context at first divergence, with the median and its interval."""
    values = sorted(contexts)
    n = len(values)
    fig = go.Figure()
    if n:
        fig.add_trace(
            go.Scatter(
                x=values,
                y=[(i + 1) / n for i in range(n)],
                mode="lines+markers" if n <= 200 else "lines",
                line={"shape": "hv", "color": PALETTE[0], "width": 2},
                marker={"size": 5},
                name="share of runs diverged by this context",
                hovertemplate="%{y:.0%} of runs diverged at ≤ %{x:,} tokens<extra></extra>",
            )
        )
    shapes = []
    if dist.median_ci:
        shapes.append(
            {
                "type": "rect", "xref": "x", "yref": "paper", "x0": dist.median_ci[0],
                "x1": dist.median_ci[1], "y0": 0, "y1": 1, "fillcolor": "rgba(194,65,12,0.12)",
                "line": {"width": 0}, "layer": "below",
            }
        )  # fmt: skip
    if dist.median is not None:
        shapes.append(
            {
                "type": "line", "xref": "x", "yref": "paper", "x0": dist.median, "x1": dist.median,
                "y0": 0, "y1": 1, "line": {"color": "#c2410c", "width": 2, "dash": "dash"},
            }
        )  # fmt: skip
    fig.update_layout(
        **base_layout(
            height=320,
            shapes=shapes,
            showlegend=False,
            xaxis={"title": "context at first divergence (tokens)", **TOKEN_AXIS, "rangemode": "tozero"},
            yaxis={"title": "share of runs", "tickformat": ".0%", "range": [0, 1.02]},
            margin={"l": 60, "r": 20, "t": 20, "b": 50},
        )
    )  # fmt: skip
    return figure_dict(fig)


def _add_production(fig, contexts: Sequence[int], comparison: LabComparison) -> None:
    """Bottom panel: each run's context at first divergence, and the median's interval."""
    if contexts:
        fig.add_trace(
            go.Box(
                x=[math.log2(max(c, 1)) for c in contexts],
                name="production",
                orientation="h",
                boxpoints="all",
                jitter=0.6,
                pointpos=0,
                marker={"color": "#c2410c", "size": 6, "opacity": 0.8},
                line={"color": "#c2410c"},
                fillcolor="rgba(194,65,12,0.10)",
                customdata=list(contexts),
                hovertemplate="%{customdata:,} tokens<extra>first divergence</extra>",
                showlegend=False,
            ),
            row=2,
            col=1,
        )
    dist = comparison.distribution
    if dist.median_ci:
        fig.add_vrect(
            x0=math.log2(max(dist.median_ci[0], 1)),
            x1=math.log2(max(dist.median_ci[1], 1)),
            fillcolor="rgba(194,65,12,0.12)",
            line={"width": 0},
            row=2,
            col=1,
        )


def _add_lab_markers(fig, family) -> None:
    """The weakest family's ECL and knee as vertical lines on both panels, labelled on top."""
    for kind, tokens in (("ecl", family.ecl_tokens), ("knee", family.knee_tokens)):
        if not tokens:
            continue
        style = MARKER_STYLES[kind]
        label = {
            "annotation_text": f"{style['label']} {numfmt.tokens(tokens)}",
            "annotation_position": "top left" if kind == "ecl" else "bottom left",
            "annotation_font": {"size": 10, "color": style["color"]},
        }
        for row in (1, 2):
            fig.add_vline(
                x=math.log2(tokens),
                line={"color": style["color"], "dash": style["dash"], "width": 1.5},
                row=row,
                col=1,
                **(label if row == 1 else {}),
            )


def _log_range(tokens: list[int]) -> tuple[float, float]:
    """The log2 x range holding every stratum and run, with a margin; (0, 1) for none."""
    if not tokens:
        return 0, 1
    return math.log2(max(min(tokens), 1)) - 0.3, math.log2(max(max(tokens), 1)) + 0.3


def lab_figure(reference, family, contexts: Sequence[int], comparison: LabComparison) -> dict:
    """Top: the lab's decline curves (the weakest family bold) with its ECL and knee. Bottom, on
    the same log-token axis: each production run's context at first divergence, and the median
    with its interval."""
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.66, 0.34],
        vertical_spacing=0.1,
        subplot_titles=[
            "Lab: task correctness by stratum (qualification in the caption)",
            f"Production: context at first divergence (n = {len(contexts)} runs)",
        ],
    )
    others = [f for f in reference.families if f.family != family.family]
    for number, other in enumerate(others):
        add_decline_curve(
            fig,
            other.as_chart_dict(),
            row=1,
            col=1,
            color="#9aa5b1",
            band=False,
            show_legend=number == 0,
            name="other families",
            legendgroup="other families",
        )
    add_decline_curve(
        fig,
        family.as_chart_dict(),
        theta=reference.threshold,
        row=1,
        col=1,
        color=PALETTE[0],
        name=f"{family.family} (weakest)",
    )
    _add_production(fig, contexts, comparison)
    _add_lab_markers(fig, family)
    axis = stratum_axis([s.tokens for s in family.strata]) if family.strata else {}
    low, high = _log_range([s.tokens for s in family.strata] + list(contexts))
    fig.update_xaxes(**{k: v for k, v in axis.items() if k != "title"}, range=[low, high])
    fig.update_xaxes(title_text="context tokens (log scale)", row=2, col=1)
    fig.update_yaxes(range=[0, 1.04], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(showticklabels=False, row=2, col=1)
    fig.update_layout(
        **base_layout(
            height=520,
            margin={"l": 60, "r": 20, "t": 40, "b": 50},
            legend={"orientation": "h", "y": -0.14, "x": 0},
        )
    )
    return figure_dict(fig)
