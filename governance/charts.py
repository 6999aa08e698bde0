"""Shared Plotly conventions. Chart builders are pure: analysis result in, figure dict out."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable

import orjson
import plotly.graph_objects as go
import plotly.io as pio
from plotly.shapeannotation import annotation_params_for_line

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


def spanning_lines(figure: go.Figure, lines: list[dict]) -> tuple[list[dict], list[dict]]:
    """Layout shapes and annotations for full-span lines, placed as `add_vline`/`add_hline`
    would place them.

    Each line is {"kind": "vline"|"hline", "at": value, "line": {...}, "row": r, "col": c,
    "annotation": {"text": …, "position": "top left", "font": {...}} or None}. Plotly's
    helpers check every trace and re-validate every shape on each call (1.4 s for the 20
    markers of a five-family sweep); these are plain dicts, added in one go.
    """
    shapes, annotations = [], []
    for spec in lines:
        xref, yref = "x", "y"
        if spec.get("row") is not None:
            subplot = figure.get_subplot(spec["row"], spec["col"])
            xref = subplot.xaxis.plotly_name.replace("axis", "")
            yref = subplot.yaxis.plotly_name.replace("axis", "")
        at = spec["at"]
        if spec["kind"] == "vline":
            span = {"x0": at, "x1": at, "y0": 0, "y1": 1, "xref": xref, "yref": f"{yref} domain"}
        else:
            span = {"x0": 0, "x1": 1, "y0": at, "y1": at, "xref": f"{xref} domain", "yref": yref}
        shapes.append({"type": "line", "line": spec["line"], **span})
        note = spec.get("annotation")
        if note:
            placed = annotation_params_for_line(
                spec["kind"], span, note.get("position", "top right")
            )
            annotations.append(
                {
                    **placed,
                    "text": note["text"],
                    "font": note.get("font", {}),
                    "xref": span["xref"],
                    "yref": span["yref"],
                }
            )
    return shapes, annotations


def add_spanning_lines(figure: go.Figure, lines: list[dict]) -> go.Figure:
    """Add `spanning_lines` to a graph-object figure in one layout update."""
    if lines:
        shapes, annotations = spanning_lines(figure, lines)
        figure.update_layout(
            shapes=[*figure.layout.shapes, *shapes],
            annotations=[*figure.layout.annotations, *annotations],
        )
    return figure


def figure_with_lines(figure: go.Figure, lines: list[dict]) -> dict:
    """`figure_dict` with `spanning_lines` appended to the dict, so no graph-object
    validation runs for them."""
    shapes, annotations = spanning_lines(figure, lines)
    data = figure_dict(figure)
    layout = data.setdefault("layout", {})
    layout["shapes"] = [*layout.get("shapes", []), *shapes]
    layout["annotations"] = [*layout.get("annotations", []), *annotations]
    return data


def figure_dict(figure: go.Figure | dict) -> dict:
    """A JSON-safe dict (numpy arrays become lists) for `json_script` and the API. A dict is
    taken as an already valid figure and not validated again."""
    if isinstance(figure, dict):
        return orjson.loads(orjson.dumps(figure, option=orjson.OPT_SERIALIZE_NUMPY))
    data = orjson.loads(pio.to_json(figure, validate=False, engine="orjson"))
    data.get("layout", {}).pop("template", None)
    return data
