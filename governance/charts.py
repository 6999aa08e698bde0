"""Shared Plotly conventions. Chart builders are pure: analysis result in, figure dict out."""

from __future__ import annotations

import html

import orjson
import plotly.graph_objects as go
import plotly.io as pio

PALETTE = ["#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#4b5563"]


AXIS = {
    "gridcolor": "#e6e9ee",
    "linecolor": "#c5ccd5",
    "zerolinecolor": "#c5ccd5",
    "automargin": True,
}


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


def vertical_lines(xs, *, line: dict, xref: str = "x", yref: str = "y") -> list[dict]:
    """Full-height vertical lines as layout shapes. Plotly's `add_vline` re-scans every shape
    on each call (quadratic: 5 s for a session with 300 compactions); this is one list."""
    return [
        {
            "type": "line",
            "x0": x,
            "x1": x,
            "xref": xref,
            "y0": 0,
            "y1": 1,
            "yref": f"{yref} domain",
            "line": line,
        }
        for x in xs
    ]


def figure_dict(figure: go.Figure | dict) -> dict:
    """A JSON-safe dict (numpy arrays become lists) for `json_script` and the API. A dict is
    taken as an already valid figure and not validated again."""
    if isinstance(figure, dict):
        return orjson.loads(orjson.dumps(figure, option=orjson.OPT_SERIALIZE_NUMPY))
    data = orjson.loads(pio.to_json(figure, validate=False, engine="orjson"))
    data.get("layout", {}).pop("template", None)
    return data
