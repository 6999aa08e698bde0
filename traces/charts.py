"""Plotly figures for traces. Pure: plain data in, a figure dict out."""

from __future__ import annotations

from dataclasses import dataclass

from governance.charts import TOKEN_AXIS, base_layout, chart_text, figure_dict, vertical_lines

MAX_POINTS = 5000


@dataclass(frozen=True)
class AgentSeries:
    label: str
    is_main: bool
    index: list[int]
    context: list[int]


@dataclass(frozen=True)
class CompactionMark:
    index: int
    pre_tokens: int | None
    post_tokens: int | None
    trigger: str


def downsample_max(
    index: list[int], values: list[int], buckets: int
) -> tuple[list[int], list[int]]:
    """Keep the largest value of each of `buckets` equal slices, so peaks survive."""
    n = len(values)
    if n <= buckets or buckets <= 0:
        return list(index), list(values)
    out_index, out_values = [], []
    for b in range(buckets):
        start, end = b * n // buckets, (b + 1) * n // buckets
        if start == end:
            continue
        peak = max(range(start, end), key=values.__getitem__)
        out_index.append(index[peak])
        out_values.append(values[peak])
    return out_index, out_values


def context_timeline(
    series: list[AgentSeries], compactions: list[CompactionMark], max_points: int = MAX_POINTS
) -> tuple[dict, bool]:
    """Context per call, one trace per agent, compaction boundaries as markers.

    Returns (figure, downsampled).
    """
    total = sum(len(s.index) for s in series)
    downsampled = total > max_points
    # Plain dicts rather than graph objects: validating thousands of points and hundreds of
    # shapes through plotly.graph_objects costs more than the rest of the page.
    trace_type = "scattergl" if total > 2000 else "scatter"  # SVG is crisper; WebGL scales
    data = []
    for s in series:
        budget = max(50, max_points * len(s.index) // total) if downsampled else len(s.index)
        x, y = downsample_max(s.index, s.context, budget)
        data.append(
            {
                "type": trace_type,
                "x": x,
                "y": y,
                "mode": "lines+markers" if len(x) < 400 else "lines",
                "name": chart_text(s.label),
                "line": {"width": 2.5 if s.is_main else 1.2},
                "marker": {"size": 4},
                "opacity": 1.0 if s.is_main else 0.75,
                "hovertemplate": "call %{x}<br>context %{y:,} tokens<extra>%{fullData.name}</extra>",
            }
        )
    if compactions:
        data.append(
            {
                "type": "scatter",
                "x": [c.index for c in compactions],
                "y": [c.pre_tokens or 0 for c in compactions],
                "mode": "markers",
                "name": "compaction",
                "marker": {"symbol": "x", "size": 11, "color": "#a4262c", "line": {"width": 1}},
                "customdata": [[c.post_tokens or 0, c.trigger] for c in compactions],
                "hovertemplate": "compaction (%{customdata[1]})<br>before %{y:,} → after %{customdata[0]:,}<extra></extra>",
            }
        )
    figure = {
        "data": data,
        "layout": base_layout(
            height=360,
            shapes=vertical_lines(
                [c.index for c in compactions], line={"color": "#a4262c", "width": 1, "dash": "dot"}
            ),
            xaxis={"title": {"text": "call (session order)"}},
            yaxis={"title": {"text": "context (tokens)"}, "rangemode": "tozero", **TOKEN_AXIS},
        ),
    }
    return figure_dict(figure), downsampled


SOURCE_COLOURS = {"transcript": "#2b6cb0", "span": "#6b46c1", "event": "#c05621"}


def _source_bars(rows: list[dict], days: list, labels: list[str]) -> list[dict]:
    bars = []
    for source in ("transcript", "span", "event"):
        by_day = {row["day"]: row for row in rows if row["source"] == source}
        if not by_day:
            continue
        bars.append(
            {
                "type": "bar",
                "x": labels,
                "y": [
                    sum(by_day[d][c] for c in TOKEN_FIELDS) if d in by_day else None for d in days
                ],
                "name": source,
                "marker": {"color": SOURCE_COLOURS[source]},
                "customdata": [by_day[d]["calls"] if d in by_day else 0 for d in days],
                "hovertemplate": "%{x}: %{y:,} tokens in %{customdata:,} calls"
                "<extra>%{fullData.name}</extra>",
            }
        )
    return bars


def reconciliation_figure(rows: list[dict]) -> dict:
    """Tokens by day as each source counted them (bars side by side), and the calls another
    source disagrees with (markers, right axis). `rows`: the selector's day/source rows."""
    days = sorted({row["day"] for row in rows})
    labels = [day.isoformat() for day in days]
    data = _source_bars(rows, days, labels)
    disagreeing = [sum(row["disagreeing_calls"] for row in rows if row["day"] == d) for d in days]
    most = max(disagreeing, default=0)
    if most:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": labels,
                "y": disagreeing,
                "yaxis": "y2",
                "name": "calls with a disagreement",
                "marker": {"symbol": "x", "size": 11, "color": "#a4262c"},
                "hovertemplate": "%{x}: %{y:,} calls<extra>disagreeing</extra>",
            }
        )
    figure = {
        "data": data,
        "layout": base_layout(
            height=360,
            barmode="group",
            xaxis={"title": {"text": "day (UTC)"}, "type": "category"},
            yaxis={"title": {"text": "tokens"}, "rangemode": "tozero", **TOKEN_AXIS},
            yaxis2={
                "title": {"text": "calls disagreeing"},
                "overlaying": "y",
                "side": "right",
                # Whole calls: integer ticks, from 0 to a little above the largest count.
                "range": [0, most * 1.25 + 1],
                "dtick": max(1, -(-most // 4)),
                "tickformat": ",d",
                "showgrid": False,
            },
            margin={"l": 70, "r": 70, "t": 50, "b": 60},
        ),
    }
    return figure_dict(figure)


TOKEN_FIELDS = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens")
