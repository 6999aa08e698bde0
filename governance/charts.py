"""Shared Plotly conventions. Chart builders are pure: analysis result in, figure dict out."""

from __future__ import annotations

import orjson
import plotly.graph_objects as go
import plotly.io as pio

PALETTE = ["#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#4b5563"]


def base_layout(**overrides) -> dict:
    layout = {
        "template": "plotly_white",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
        "colorway": PALETTE,
        "hovermode": "closest",
        "legend": {"orientation": "h", "y": -0.2},
    }
    layout.update(overrides)
    return layout


def figure_dict(figure: go.Figure | dict) -> dict:
    """A JSON-safe dict (numpy arrays become lists) for `json_script` and the API."""
    if isinstance(figure, dict):
        figure = go.Figure(figure)
    return orjson.loads(pio.to_json(figure, validate=False, engine="orjson"))
