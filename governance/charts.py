"""Shared Plotly conventions. Chart builders are pure: analysis result in, figure dict out."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable

import orjson
import plotly.graph_objects as go
import plotly.io as pio

import numfmt

PALETTE = ["#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#4b5563"]


AXIS = {
    "gridcolor": "#e6e9ee",
    "linecolor": "#c5ccd5",
    "zerolinecolor": "#c5ccd5",
    "automargin": True,
}


# A linear axis in tokens: d3's ".3~s" writes ticks as numfmt.tokens does ("200k", "1.5M").
TOKEN_AXIS = {"tickformat": numfmt.TOKENS_D3}
# Mantissas per decade for log-axis ticks, finest first.
LOG_STEPS = ((1, 1.5, 2, 3, 5, 7), (1, 2, 5), (1, 3), (1,))


def log_axis(values: Iterable[float], fmt: Callable = numfmt.tokens, most: int = 7) -> dict:
    """A log axis over `values` with ticks at 1-2-5 steps (as fine as `most` ticks allow),
    each labelled by `fmt`. Plotly's own log ticks label the minor digits ("7 8 9 100 2"),
    which collide and read as other numbers."""
    positive = [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    axis = {"type": "log"}
    if not positive:
        return axis
    low, high = min(positive), max(positive)
    decades = range(math.floor(math.log10(low)), math.floor(math.log10(high)) + 2)
    # Plotly pads its range past the data, so a tick just beyond the last point still shows.
    reach = (low / 10**0.05, high * 10**0.05)
    for step in LOG_STEPS:
        ticks = [m * 10**e for e in decades for m in step if reach[0] <= m * 10**e <= reach[1]]
        if len(ticks) <= most:
            break
    if len(ticks) < 2:  # a narrow range: its ends, rounded
        ticks = sorted({float(numfmt.significant(v, 2).replace(",", "")) for v in (low, high)})
    return {**axis, "tickmode": "array", "tickvals": ticks, "ticktext": [fmt(t) for t in ticks]}


def chart_text(value: str) -> str:
    """Text from users or transcripts, for a trace name or label. Plotly reads a subset of
    HTML there (links, styles, line breaks), so it is escaped; hover templates show such
    text through %{fullData.name}, never by concatenation, which would also read `%{…}`."""
    return html.escape(str(value), quote=False)


def base_layout(**overrides) -> dict:
    """A light, template-free layout (templates would be embedded in every figure's JSON)."""
    layout = {
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "colorway": PALETTE,
        "hovermode": "closest",
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left", "yanchor": "bottom"},
    }
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {**AXIS, **overrides.pop(axis, {})}
    layout.update(overrides)
    return layout


def figure_dict(figure: go.Figure | dict) -> dict:
    """A JSON-safe dict (numpy arrays become lists) for `json_script` and the API."""
    if isinstance(figure, dict):
        figure = go.Figure(figure)
    data = orjson.loads(pio.to_json(figure, validate=False, engine="orjson"))
    data.get("layout", {}).pop("template", None)
    return data
