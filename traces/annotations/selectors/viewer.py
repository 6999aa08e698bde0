"""Reads for the run viewer: sessions, agents and runs of the workspace, the scope of a view,
its strip and its page of steps.

The viewer never loads a whole run: the context strip reads three columns of the run's calls,
and the step list reads one window of calls and their texts.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import Http404

from governance.models import Workspace
from traces.annotations.analysis.steps import Step, StepRow, build_step, full_part
from traces.ingest import decompress_text
from traces.models import Agent, AgentKind, Call, CallText, Compaction, Run, Session

WINDOW = 50


def session_get(*, workspace: Workspace, pk: int) -> Session:
    session = Session.objects.filter(workspace=workspace, pk=pk).first()
    if session is None:
        raise Http404("No such session in this workspace.")
    return session


def recent_sessions(*, workspace: Workspace, limit: int = 5) -> list[Session]:
    return list(Session.objects.filter(workspace=workspace).order_by("-started_at", "-id")[:limit])


def agent_get(*, session: Session, pk: int) -> Agent:
    agent = Agent.objects.filter(session=session, pk=pk).select_related("parent").first()
    if agent is None:
        raise Http404("No such agent in this session.")
    return agent


def main_agent(*, session: Session) -> Agent:
    """The main thread, or (for harnesses without one) the agent with the most calls."""
    agents = Agent.objects.filter(session=session)
    agent = (
        agents.filter(kind=AgentKind.MAIN).order_by("started_at", "id").first()
        or agents.order_by("-call_count", "id").first()
    )
    if agent is None:
        raise Http404("This session has no agents.")
    return agent


def run_get(*, session: Session, pk: int) -> Run:
    run = Run.objects.filter(session=session, pk=pk).select_related("agent", "started_by").first()
    if run is None:
        raise Http404("No such run in this session.")
    return run


def run_in_workspace(*, workspace: Workspace, pk: int) -> Run:
    run = Run.objects.filter(workspace=workspace, pk=pk).select_related("session", "agent").first()
    if run is None:
        raise Http404("No such run in this workspace.")
    return run


@dataclass(frozen=True)
class Scope:
    """The calls a viewer page shows: an agent's calls from `lo` to `hi` (agent indexes)."""

    agent: Agent
    run: Run | None
    lo: int
    hi: int

    @property
    def count(self) -> int:
        return max(0, self.hi - self.lo + 1)

    @property
    def pages(self) -> int:
        return max(1, -(-self.count // WINDOW))


def scope_for(*, agent: Agent, run: Run | None = None) -> Scope:
    if run is None:
        bounds = (
            Call.objects.filter(agent=agent)
            .order_by("agent_index")
            .values_list("agent_index", flat=True)
        )
        first = bounds.first()
        last = bounds.last()
        if first is None:
            return Scope(agent, None, 0, -1)
        return Scope(agent, None, first, last)
    ends = dict(
        Call.objects.filter(
            session_id=run.session_id,
            session_index__in=[run.first_call_index, run.last_call_index],
        ).values_list("session_index", "agent_index")
    )
    return Scope(agent, run, ends[run.first_call_index], ends[run.last_call_index])


def page_of_call(*, scope: Scope, call_index: int) -> int | None:
    """The 1-based window that holds the call, or None when the call is not in the scope."""
    agent_index = (
        Call.objects.filter(
            session_id=scope.agent.session_id, session_index=call_index, agent=scope.agent
        )
        .values_list("agent_index", flat=True)
        .first()
    )
    if agent_index is None or not scope.lo <= agent_index <= scope.hi:
        return None
    return (agent_index - scope.lo) // WINDOW + 1


def strip(*, scope: Scope) -> dict[str, list]:
    """Context per call for the whole scope, as columns."""
    rows = (
        Call.objects.filter(agent=scope.agent, agent_index__gte=scope.lo, agent_index__lte=scope.hi)
        .order_by("agent_index")
        .values_list("session_index", "context_tokens")
    )
    index, context = [], []
    for i, c in rows:
        index.append(i)
        context.append(c)
    return {"index": index, "context": context}


STEP_COLUMNS = (
    "id", "session_index", "agent_index", "timestamp", "model", "context_tokens", "output_tokens",
    "input_tokens", "cache_creation_tokens", "cache_read_tokens",
)  # fmt: skip


def steps_window(*, scope: Scope, page: int, spawns: dict[str, int]) -> list[Step]:
    """One window of steps with their texts (WINDOW calls, plus the one before for growth)."""
    start = scope.lo + (page - 1) * WINDOW
    end = min(scope.hi, start + WINDOW - 1)
    # From the agent's call before the window, so the first step's growth is known (across a
    # compaction it shows the drop).
    rows = list(
        Call.objects.filter(agent=scope.agent, agent_index__gte=start - 1, agent_index__lte=end)
        .order_by("agent_index")
        .values_list(*STEP_COLUMNS)
    )
    texts = {
        call_id: decompress_text(data)
        for call_id, data in CallText.objects.filter(
            call_id__in=[r[0] for r in rows if r[2] >= start]
        ).values_list("call_id", "data")
    }
    steps = []
    previous = None
    for row in rows:
        pk, index, agent_index, ts, model, ctx, out, inp, cc, cr = row
        if agent_index >= start:
            steps.append(
                build_step(
                    StepRow(index, agent_index, ts, model, ctx, out, inp, cc, cr, previous),
                    texts.get(pk),
                    position=agent_index - scope.lo + 1,
                    spawns=spawns,
                )
            )
        previous = ctx
    return steps


def spawn_map(*, session: Session) -> dict[str, int]:
    return dict(
        Agent.objects.filter(session=session)
        .exclude(spawn_tool_call_id="")
        .values_list("spawn_tool_call_id", "pk")
    )


def agents_of(*, session: Session) -> list[Agent]:
    return list(Agent.objects.filter(session=session).order_by("started_at", "id"))


def runs_of(*, agent: Agent) -> list[Run]:
    return list(Run.objects.filter(agent=agent).order_by("index"))


def compactions_in(*, scope: Scope) -> dict[int, Compaction]:
    """Compactions of the agent keyed by the session index of the first call after them."""
    if scope.count == 0:
        return {}
    rows = Compaction.objects.filter(agent=scope.agent, after_call_index__isnull=False)
    return {c.after_call_index: c for c in rows}


def spawning_call(*, agent: Agent) -> int | None:
    """The parent's call that started a subagent: its last call before the subagent's first."""
    if agent.parent_id is None:
        return None
    first = (
        Call.objects.filter(agent=agent)
        .order_by("agent_index")
        .values_list("session_index", flat=True)
        .first()
    )
    if first is None:
        return None
    return (
        Call.objects.filter(agent_id=agent.parent_id, session_index__lt=first)
        .order_by("-session_index")
        .values_list("session_index", flat=True)
        .first()
    )


def call_full_text(*, session: Session, call_index: int, key: str) -> str:
    row = (
        Call.objects.filter(session=session, session_index=call_index)
        .values_list("id", flat=True)
        .first()
    )
    if row is None:
        raise Http404("No such call in this session.")
    data = CallText.objects.filter(call_id=row).values_list("data", flat=True).first()
    text = full_part(decompress_text(data) if data is not None else None, key)
    if text is None:
        raise Http404("No such part of this call.")
    return text
