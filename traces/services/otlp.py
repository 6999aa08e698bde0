"""The OTLP receive path: store the request, load its calls, queue the derive step."""

from __future__ import annotations

from django.db import transaction

from governance.models import Workspace
from governance.services import audit_record
from traces.formats.otlp import OtlpResult, parse_request
from traces.formats.records import CallRecord, SessionInfo
from traces.ingest import IngestSummary, TraceLoader
from traces.ingest.joins import (
    OTLP_HARNESS,
    calls_matching,
    events_link,
    harness_sessions_named,
    otlp_sessions_adopt,
)
from traces.ingest.rules import _fit_for_columns
from traces.models import Call, CallSource
from traces.services.derivation import (
    _sessions_mark,
    derive_pending_queue,
)
from traces.services.telemetry import otlp_body_store


def otlp_receive(*, workspace: Workspace, user, body: bytes, content_type: str) -> OtlpResult:
    """Store the request, decode it, and load its calls before answering (2xx means
    durable). The workspace's identity policy is applied to the body before it is stored
    (see `otlp_body_store`). A body that cannot be decoded is kept too, unless it may hold
    identity attributes; then OtlpDecodeError is raised."""
    upload, created, stored, stored_type, _ = otlp_body_store(
        workspace=workspace, user=user, body=body, content_type=content_type, signal="traces"
    )
    result = parse_request(stored, stored_type)
    if not created:
        return result  # the same bytes were received before: nothing new is written
    summary = IngestSummary()
    _harness_sessions_join(workspace, result)
    if result.calls or result.compactions:
        loader = TraceLoader(
            workspace=workspace,
            summary=summary,
            file_name=upload.original_name,
            mark_new_sessions=True,
        )
        loader.prepare_sessions(list(result.sessions.values()))
        spans = _span_sources(loader, result.calls)
        # A span of a response a transcript already gave is that call: no Call of its own.
        known = calls_matching(set(spans), transcript_only=True)
        for record in result.records():
            if isinstance(record, CallRecord):
                name = (loader._sessions.get((record.harness, record.session_id)), record.key)
                if name in known:
                    continue
            loader.feed(record)
        touched = loader.finish()
        _call_sources_store(workspace, spans, known)
        # A harness session these spans created takes over the `otlp` session other
        # producers' spans made for it before.
        touched |= otlp_sessions_adopt(session_ids=loader.created_sessions)
        if touched:
            # Sessions this request created too: a derive run may have cleared the mark
            # they were created with before these calls committed.
            _sessions_mark(touched)
            workspace_id = workspace.pk
            transaction.on_commit(lambda: derive_pending_queue(workspace_id=workspace_id))
    # One audit row per stored request, with its counts (not one per span or call).
    audit_record(
        workspace=workspace,
        actor=user,
        action="trace_otlp.receive",
        obj=upload,
        data={
            "bytes": upload.size,
            "spans": result.spans,
            "ignored_spans": result.ignored_spans,
            "rejected_spans": len(result.rejected),
            # Spans whose call was stored already (a resent batch) or repeated in this one.
            "duplicate_spans": len(result.calls) - summary.calls,
            "calls": summary.calls,
            "compactions": len(result.compactions),
            "sessions": summary.sessions,
            "agents": summary.agents,
        },
    )
    return result


def _harness_sessions_join(workspace: Workspace, result: OtlpResult) -> None:
    """Spans of other producers whose conversation id names a Claude Code or Codex session
    of the workspace belong to that session: their records take its harness (in place).
    Their ids are first made storable, as the loader stores them, so that they compare."""
    others = [record for record in result.records() if record.harness == OTLP_HARNESS]
    if not others:
        return
    for record in others:
        _fit_for_columns(record)
    named = harness_sessions_named(
        workspace_id=workspace.pk, external_ids={_external(record) for record in others}
    )
    for record in others:
        if _external(record) in named:
            record.harness = named[_external(record)][0]
    result.sessions = {(i.harness, i.external_id): i for i in result.sessions.values()}
    result.agents = {(a.harness, a.session_id, a.agent_id): a for a in result.agents.values()}


def _external(record) -> str:
    return record.external_id if isinstance(record, SessionInfo) else record.session_id


def _span_sources(
    loader: TraceLoader, calls: list[CallRecord]
) -> dict[tuple[int, str], CallRecord]:
    """(session pk, span key) -> the span's call record (the most output of repeats)."""
    spans: dict[tuple[int, str], CallRecord] = {}
    for record in calls:
        session_pk = loader._sessions.get((record.harness, record.session_id))
        if session_pk is None:
            continue
        name = (session_pk, record.key)
        if name not in spans or record.output_tokens > spans[name].output_tokens:
            spans[name] = record
    return spans


def _call_sources_store(workspace: Workspace, spans: dict, known: dict) -> None:
    """Keep each span's own counts (a CallSource row) on its call: the transcript's call
    it matched, else the call it was loaded as; link the events waiting for those calls."""
    if not spans:
        return
    loaded = {}
    for name in spans:
        if name not in known:
            loaded.setdefault(name[0], set()).add(name[1])
    own: dict[tuple[int, str], int] = {}
    for session_pk, keys in loaded.items():
        for pk, key in Call.objects.filter(session_id=session_pk, key__in=keys).values_list(
            "id", "key"
        ):
            own[(session_pk, key)] = pk
    rows = []
    for name, record in spans.items():
        call_pk = known.get(name) or own.get(name)
        if call_pk is None:
            continue  # rejected by the loader (implausible counts)
        rows.append(
            CallSource(
                workspace=workspace, session_id=name[0], call_id=call_pk, source="span",
                key=record.key[:300], timestamp=record.timestamp, model=record.model[:200],
                input_tokens=record.input_tokens,
                cache_creation_tokens=record.cache_creation_tokens,
                cache_read_tokens=record.cache_read_tokens, output_tokens=record.output_tokens,
                reasoning_tokens=record.reasoning_tokens,
            )
        )  # fmt: skip
    CallSource.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
    events_link(own)
