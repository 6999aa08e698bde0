"""The OTLP receive path: store the request, load its calls, queue the derive step."""

from __future__ import annotations

from django.db import transaction

from governance.models import Workspace
from governance.services import audit_record
from traces.formats.otlp import OtlpResult, parse_request
from traces.ingest import IngestSummary, TraceLoader
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
    if result.calls or result.compactions:
        loader = TraceLoader(
            workspace=workspace,
            summary=summary,
            file_name=upload.original_name,
            mark_new_sessions=True,
        )
        loader.prepare_sessions(list(result.sessions.values()))
        for record in result.records():
            loader.feed(record)
        touched = loader.finish()
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
