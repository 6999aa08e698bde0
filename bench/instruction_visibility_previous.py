"""Instruction visibility before the job (main at feba188): every selected agent's call
text decompressed and matched in Python, call by call. Kept for `bench.instruction_visibility`
as the same-run baseline; not used by the product."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pandas as pd
import zstandard

from traces.analysis.instruction_visibility import CallThinking, Matcher, instruction_visibility
from traces.analytics.instruction_visibility_selectors import (
    Delivery,
    Subject,
    _calls,
    _repository_sessions,
)
from traces.models import CallText

TEXT_CHUNK = 1000


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
