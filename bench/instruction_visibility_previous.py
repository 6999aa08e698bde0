"""Instruction visibility before the job (main at feba188): every selected agent's call
text decompressed and matched in Python, call by call. Kept for `bench.instruction_visibility`
as the same-run baseline; not used by the product."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import orjson
import pandas as pd
import zstandard

from governance.models import Workspace
from traces.analysis.instruction_visibility import CallThinking, Matcher, instruction_visibility
from traces.analytics.instruction_visibility_selectors import (
    Delivery,
    Subject,
    TooManyCalls,
    _repository_sessions,
)
from traces.analytics.selectors import AnalyticsFilters, _runs_for_calls, selected_calls
from traces.models import Call, CallText, Run

TEXT_CHUNK = 1000


# The calls as main read them before the job (feba188).
def _calls(workspace: Workspace, filters: AnalyticsFilters, max_calls: int | None) -> pd.DataFrame:
    """Every call of the agents the filters reach, in (session, agent, order), with
    `selected` marking the calls the filters select (the rest only carry delivery)."""
    columns = ["id", "session", "agent", "order", "session_index"]
    chosen = pd.DataFrame(
        list(
            selected_calls(workspace, filters).values_list(
                "id", "session_id", "agent_id", "agent_index", "session_index"
            )
        ),
        columns=columns,
    )
    if filters.task_type and len(chosen):
        runs = pd.DataFrame(
            list(
                Run.objects.filter(
                    workspace=workspace, agent_id__in=chosen["agent"].unique().tolist()
                ).values_list("id", "agent_id", "first_call_index", "last_call_index", "task_type")
            ),
            columns=["id", "agent", "first", "last", "task_type"],
        )
        _, task_types = _runs_for_calls(
            chosen["agent"].to_numpy(np.int64), chosen["session_index"].to_numpy(np.int64), runs
        )
        chosen = chosen[task_types == filters.task_type]
    agents = chosen["agent"].unique().tolist()
    every = pd.DataFrame(
        [
            row
            for start in range(0, len(agents), 5000)
            for row in Call.objects.filter(
                workspace=workspace, agent_id__in=agents[start : start + 5000]
            )
            .order_by()
            .values_list("id", "session_id", "agent_id", "agent_index", "session_index")
        ],
        columns=columns,
    )
    if max_calls is not None and len(every) > max_calls:
        raise TooManyCalls(len(every), max_calls)
    every["selected"] = every["id"].isin(chosen["id"])
    return every.sort_values(["session", "agent", "order"], kind="stable")


def _thinking(blocks) -> tuple[str, ...]:
    return tuple(
        str(b.get("text") or "")
        for b in blocks or ()
        if isinstance(b, dict) and b.get("type") == "thinking"
    )


def _results(text: dict) -> list[str]:
    return [str(r.get("content") or "") for r in (text.get("results") or {}).values()]


def _walk(calls: pd.DataFrame, subject: Subject, loaded_sessions: set[int]) -> Iterator:
    """The selected calls as CallThinking, with each agent's delivery point found as its
    calls are read in order: a prompt or compaction summary that holds the instruction
    delivers it at that call; a tool result that holds it, at the agent's next call."""
    matcher = Matcher(subject.text)
    ids = calls["id"].tolist()
    sessions = calls["session"].tolist()
    agents = calls["agent"].tolist()
    orders = calls["order"].tolist()
    selected = calls["selected"].tolist()
    delivered: dict[int, int] = {}
    from_next_call: set[int] = set()
    # One decompressor for the walk: building one per call (as `decompress_text` does)
    # costs twice as much as decompressing and parsing a typical call's text.
    decompressor = zstandard.ZstdDecompressor()
    for start in range(0, len(ids), TEXT_CHUNK):
        chunk = ids[start : start + TEXT_CHUNK]
        texts = dict(CallText.objects.filter(call_id__in=chunk).values_list("call_id", "data"))
        for offset, call_id in enumerate(chunk):
            i = start + offset
            session, agent, order = sessions[i], agents[i], orders[i]
            data = texts.get(call_id)
            text = orjson.loads(decompressor.decompress(bytes(data))) if data is not None else {}
            if agent not in delivered:
                if (
                    subject.delivery == Delivery.SESSION_START
                    or session in loaded_sessions
                    or agent in from_next_call
                    or matcher.in_window([text.get("prompt") or "", text.get("summary") or ""])
                ):
                    delivered[agent] = order
                elif subject.delivery != Delivery.SESSION_START and matcher.in_window(
                    _results(text)
                ):
                    from_next_call.add(agent)
            if selected[i]:
                yield CallThinking(
                    session, agent, order, delivered.get(agent), _thinking(text.get("blocks"))
                )


def count_previous(*, workspace, filters, subject: Subject) -> dict:
    """The counts as main computed them (without the session labels)."""
    calls = _calls(workspace, filters, None)
    session_ids = calls["session"].unique().tolist()
    loaded = (
        _repository_sessions(workspace, session_ids, subject.repository_name)
        if subject.delivery == Delivery.REPOSITORY
        else set()
    )
    return instruction_visibility(subject.text, _walk(calls, subject, loaded))
