"""Runs, compaction placement, file-touch positions and agent starts for one session. Pure.

Input is the session's calls in order (by time, then source position) and its
compactions; output is what the derive step writes back.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime
from statistics import median

from traces.analysis.task_types import classify

FORK_SHARE = 0.8  # a subagent starting with ≥ 80% of its parent's window was forked from it
FRESH_SHARE = 0.5
FORK_MIN_PARENT = 20_000


@dataclass(slots=True)
class CallRow:
    id: int
    agent: int
    index: int  # session index
    timestamp: datetime
    context: int
    billed: int
    signature: str
    touches: str


@dataclass(slots=True)
class CompactionRow:
    id: int
    agent: int
    timestamp: datetime | None
    kind: str
    pre_tokens: int | None
    post_tokens: int | None


@dataclass
class RunOut:
    agent: int
    index: int
    started_by: int | None
    first_call_index: int
    last_call_index: int
    call_count: int
    max_context: int
    median_context: int
    task_type: str
    task_type_reason: str
    started_at: datetime
    ended_at: datetime


@dataclass
class CompactionOut:
    id: int
    before_call_index: int | None
    after_call_index: int | None
    pre_tokens: int | None
    post_tokens: int | None


@dataclass
class TouchOut:
    agent: int
    run_index: int
    call_index: int
    path: str
    mode: str
    token_position: int


@dataclass
class AgentOut:
    agent: int
    call_count: int
    max_context: int
    total_tokens: int
    initial_context: int | None
    started_at: datetime | None
    ended_at: datetime | None
    start_kind: str | None  # None: keep what the parser said


@dataclass
class SessionDerived:
    runs: list[RunOut] = field(default_factory=list)
    compactions: list[CompactionOut] = field(default_factory=list)
    touches: list[TouchOut] = field(default_factory=list)
    agents: list[AgentOut] = field(default_factory=list)


def derive_session(
    calls: list[CallRow],
    compactions: list[CompactionRow],
    parents: dict[int, int | None],
    start_kinds: dict[int, str],
) -> SessionDerived:
    """`calls` must be in session order; `parents` maps agent -> parent agent."""
    result = SessionDerived()
    by_agent: dict[int, list[CallRow]] = {}
    for call in calls:
        by_agent.setdefault(call.agent, []).append(call)

    boundaries: dict[int, list[int]] = {}  # agent -> positions (in its own calls) where runs start
    boundary_compaction: dict[tuple[int, int], int] = {}
    for compaction in sorted(
        compactions, key=lambda c: (c.timestamp is None, c.timestamp or datetime.min)
    ):
        own = by_agent.get(compaction.agent, [])
        position = _position_after(own, compaction.timestamp)
        before = own[position - 1] if position > 0 else None
        after = own[position] if position < len(own) else None
        result.compactions.append(
            CompactionOut(
                id=compaction.id,
                before_call_index=before.index if before else None,
                after_call_index=after.index if after else None,
                pre_tokens=compaction.pre_tokens
                if compaction.pre_tokens is not None
                else (before.context if before else None),
                post_tokens=compaction.post_tokens
                if compaction.post_tokens is not None
                else (after.context if after else None),
            )
        )
        if compaction.kind == "full" and 0 < position < len(own):
            boundaries.setdefault(compaction.agent, []).append(position)
            boundary_compaction[(compaction.agent, position)] = compaction.id

    for agent, own in by_agent.items():
        starts = sorted({0, *boundaries.get(agent, [])})
        position_tokens = 0
        previous_context: int | None = None
        run_of_call: list[int] = []
        for run_index, start in enumerate(starts):
            end = starts[run_index + 1] if run_index + 1 < len(starts) else len(own)
            segment = own[start:end]
            contexts = [c.context for c in segment]
            signatures = [token for c in segment for token in c.signature.split()]
            kind = classify(signatures)
            result.runs.append(
                RunOut(
                    agent=agent,
                    index=run_index,
                    started_by=boundary_compaction.get((agent, start)),
                    first_call_index=segment[0].index,
                    last_call_index=segment[-1].index,
                    call_count=len(segment),
                    max_context=max(contexts),
                    median_context=int(median(contexts)),
                    task_type=kind.task_type,
                    task_type_reason=kind.reason[:500],
                    started_at=segment[0].timestamp,
                    ended_at=segment[-1].timestamp,
                )
            )
            run_of_call.extend([run_index] * len(segment))
        for call, run_index in zip(own, run_of_call, strict=True):
            # Token position: cumulative context the agent took in, so that the distance
            # between two touches is the window growth between them.
            if previous_context is None:
                position_tokens = call.context
            else:
                position_tokens += max(0, call.context - previous_context)
            previous_context = call.context
            if not call.touches:
                continue
            for line in call.touches.split("\n"):
                mode, _, path = line.partition("\t")
                if path:
                    result.touches.append(
                        TouchOut(agent, run_index, call.index, path[:1000], mode, position_tokens)
                    )

    first_context = {agent: own[0].context for agent, own in by_agent.items()}
    for agent, own in by_agent.items():
        result.agents.append(
            AgentOut(
                agent=agent,
                call_count=len(own),
                max_context=max(c.context for c in own),
                total_tokens=sum(c.billed for c in own),
                initial_context=own[0].context,
                started_at=own[0].timestamp,
                ended_at=own[-1].timestamp,
                start_kind=_start_kind(agent, own, by_agent, parents, start_kinds, first_context),
            )
        )
    return result


def _position_after(own: list[CallRow], timestamp: datetime | None) -> int:
    """Index of the first of the agent's calls strictly after the compaction."""
    if timestamp is None:
        return len(own)
    stamps = [c.timestamp for c in own]
    return bisect.bisect_right(stamps, timestamp)


def _start_kind(agent, own, by_agent, parents, start_kinds, first_context) -> str | None:
    parent = parents.get(agent)
    if parent is None or parent not in by_agent:
        return None
    spawn_time = own[0].timestamp
    parent_calls = by_agent[parent]
    position = bisect.bisect_left([c.timestamp for c in parent_calls], spawn_time)
    if position == 0:
        return None
    parent_context = parent_calls[position - 1].context
    initial = first_context[agent]
    if parent_context >= FORK_MIN_PARENT and initial >= FORK_SHARE * parent_context:
        return "fork"
    if initial < FRESH_SHARE * parent_context or start_kinds.get(agent) == "fresh":
        return "fresh"
    return None
