"""Incident view: tokens per day by agent, top consumers, forked starts, subagent share. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

FORK_BOUND = 100_000


@dataclass
class AgentRow:
    agent: int
    session: int
    label: str
    kind: str
    start_kind: str
    initial_context: int
    calls: int
    tokens: float


@dataclass
class Incidents:
    days: list[str]
    day_totals: list[float]
    top: list[dict]  # per top consumer: agent row + tokens per day
    top_share: float | None
    subagent_share: float | None
    forked: list[dict]
    fork_bound: int
    total_tokens: float
    agents: int
    message: str = ""
    series: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def incidents(
    agent_ids: np.ndarray,
    day: np.ndarray,
    billed: np.ndarray,
    agents: dict[int, AgentRow],
    top_n: int = 10,
    fork_bound: int = FORK_BOUND,
) -> Incidents:
    """`agent_ids`, `day` (whole days since the epoch, UTC) and `billed` are per call."""
    total = float(billed.sum()) if len(billed) else 0.0
    if total == 0:
        return Incidents(
            [], [], [], None, None, [], fork_bound, 0.0, 0, "No tokens in this selection."
        )
    days = sorted(set(day.tolist()))
    day_index = {d: i for i, d in enumerate(days)}
    day_codes = np.array([day_index[d] for d in day.tolist()])
    per_agent = {}
    for agent in np.unique(agent_ids):
        mask = agent_ids == agent
        per_agent[int(agent)] = np.bincount(
            day_codes[mask], weights=billed[mask], minlength=len(days)
        )
    ranked = sorted(per_agent, key=lambda a: -per_agent[a].sum())
    top_ids = ranked[:top_n]
    top = []
    for agent in top_ids:
        row = agents.get(agent)
        tokens = float(per_agent[agent].sum())
        top.append(
            {
                **(asdict(row) if row else {"agent": agent}),
                "tokens": tokens,
                "share": tokens / total,
                "per_day": per_agent[agent].tolist(),
            }
        )
    subagent_tokens = sum(
        per_agent[a].sum() for a in per_agent if agents.get(a) and agents[a].kind != "main"
    )
    forked = [
        {**asdict(row), "share": row.tokens / total}
        for row in sorted(agents.values(), key=lambda r: -r.initial_context)
        if row.kind != "main" and row.initial_context > fork_bound and row.agent in per_agent
    ]
    return Incidents(
        days=days,
        day_totals=np.bincount(day_codes, weights=billed, minlength=len(days)).tolist(),
        top=top,
        top_share=sum(t["tokens"] for t in top) / total,
        subagent_share=float(subagent_tokens / total),
        forked=forked,
        fork_bound=fork_bound,
        total_tokens=total,
        agents=len(per_agent),
    )
