"""Incident view: tokens per day by agent, top consumers, forked starts, subagent share. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

FORK_BOUND = 100_000
# With fewer agents, "who spent the tokens" describes individual agents, not a fleet: the
# per-day chart and the shares are withheld (forked starts are still flagged one by one).
MIN_AGENTS = 5


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
    top_share_note: str = ""
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
    min_agents: int = MIN_AGENTS,
) -> Incidents:
    """`agent_ids`, `day` (a label per call, e.g. its UTC date) and `billed` are per call.

    A forked start is a subagent whose first call carries more than `fork_bound` tokens."""
    total = float(billed.sum()) if len(billed) else 0.0
    if total == 0:
        return Incidents(
            [], [], [], None, None, [], fork_bound, 0.0, 0, "No tokens in this selection."
        )
    day_labels, day_codes = np.unique(day, return_inverse=True)
    days = [str(d) for d in day_labels]
    agent_list, agent_codes = np.unique(agent_ids, return_inverse=True)
    agent_tokens = np.bincount(agent_codes, weights=billed, minlength=len(agent_list))
    tokens_of = dict(zip(agent_list.tolist(), agent_tokens.tolist(), strict=True))
    forked = [
        {**asdict(row), "share": row.tokens / total}
        for row in sorted(agents.values(), key=lambda r: -r.initial_context)
        if row.kind != "main" and row.initial_context > fork_bound and row.agent in tokens_of
    ]
    if len(tokens_of) < min_agents:
        return Incidents(
            [], [], [], None, None, forked, fork_bound, total, len(tokens_of),
            f"Only {len(tokens_of)} agent{'' if len(tokens_of) == 1 else 's'} (fewer than {min_agents}): too few to say who "
            "dominated the spend; tokens per day and the top consumers' and subagents' "
            "shares are not drawn.",
        )  # fmt: skip
    # Largest first; ties in agent order.
    top_codes = np.argsort(-agent_tokens, kind="stable")[:top_n]
    top = []
    for code in top_codes.tolist():
        agent = int(agent_list[code])
        row = agents.get(agent)
        mask = agent_codes == code
        per_day = np.bincount(day_codes[mask], weights=billed[mask], minlength=len(days))
        tokens = float(agent_tokens[code])
        top.append(
            {
                **(asdict(row) if row else {"agent": agent}),
                "tokens": tokens,
                "share": tokens / total,
                "per_day": per_day.tolist(),
            }
        )
    subagent_tokens = sum(
        tokens for a, tokens in tokens_of.items() if agents.get(a) and agents[a].kind != "main"
    )
    # When every agent is in the top list its share is 100% by construction: not reported.
    whole = len(tokens_of) <= top_n
    return Incidents(
        days=days,
        day_totals=np.bincount(day_codes, weights=billed, minlength=len(days)).tolist(),
        top=top,
        top_share=None if whole else sum(t["tokens"] for t in top) / total,
        subagent_share=float(subagent_tokens / total),
        forked=forked,
        fork_bound=fork_bound,
        total_tokens=total,
        agents=len(tokens_of),
        top_share_note=f"all {len(tokens_of)} agents are listed, so a top-{top_n} share is 100% by construction"
        if whole
        else "",
    )
