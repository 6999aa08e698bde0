"""Chart builders for costs: pure, analysis rows in, Plotly figure dict out."""

from __future__ import annotations

import plotly.graph_objects as go

import numfmt
from governance.charts import PALETTE, base_layout, chart_text, figure_dict

FORK_COLOR = "#b91c1c"


def agent_type_cost(rows: list[dict]) -> dict:
    """Horizontal bars: dollars by row `label` (agent type, or query source and agent name),
    forked starts in red and named so."""
    priced = [r for r in rows if r["cost"].priced_calls][:20]
    priced.reverse()  # costliest on top
    labels = [
        chart_text(f"{r['label'][:40]}{' (fork)' if r['start_kind'] == 'fork' else ''}")
        for r in priced
    ]
    values = [float(r["cost"].usd) for r in priced]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            marker={
                "color": [FORK_COLOR if r["start_kind"] == "fork" else PALETTE[0] for r in priced]
            },
            text=[numfmt.usd(v) for v in values],
            textposition="auto",
            customdata=[
                [r["agents"] if r["agents"] is not None else "–", r["cost"].priced_calls]
                for r in priced
            ],
            hovertemplate="%{y}: %{text}<br>%{customdata[0]} agents, %{customdata[1]} priced calls"
            "<extra></extra>",
        )
    )
    fig.update_layout(
        **base_layout(
            height=max(220, 60 + 28 * len(priced)),
            xaxis={"title": "US dollars", "tickprefix": "$"},
            margin={"l": 220, "r": 20, "t": 30, "b": 50},
        )
    )
    return figure_dict(fig)
