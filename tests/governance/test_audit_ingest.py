"""Bulk ingestion is audited once per OTLP request and once per CLI run, with its counts."""

import io
import json

import pytest
from django.core.management import call_command
from django.test import Client

from governance.models import AuditEvent
from governance.services import api_token_create
from traces.models import Call, RawUpload

pytestmark = pytest.mark.django_db


def otlp_body(*span_ids: str) -> bytes:
    spans = [
        {
            "traceId": "5B8EFFF798038103D269B633813FC60C",
            "spanId": span_id,
            "name": "chat",
            "startTimeUnixNano": "1767225600000000000",
            "attributes": [
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "900"}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "7"}},
            ],
        }
        for span_id in span_ids
    ]
    return json.dumps(
        {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}
    ).encode()


def post_otlp(token: str, body: bytes):
    return Client().post(
        "/v1/traces",
        data=body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_one_audit_event_per_otlp_request(workspace, members):
    token = api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext
    body = otlp_body("EEE19B7EC3C1B174", "EEE19B7EC3C1B175", "EEE19B7EC3C1B176")
    assert post_otlp(token, body).status_code == 200
    assert Call.objects.filter(workspace=workspace).count() == 3
    [event] = AuditEvent.objects.filter(action="trace_otlp.receive")
    upload = RawUpload.objects.get(workspace=workspace)
    assert event.actor == members["editor"] and event.workspace == workspace
    assert (event.object_type, event.object_id) == ("traces.rawupload", str(upload.pk))
    assert event.data == {
        "bytes": len(body),
        "spans": 3,
        "ignored_spans": 0,
        "rejected_spans": 0,
        "duplicate_spans": 0,
        "calls": 3,
        "compactions": 0,
        "sessions": 1,
        "agents": 1,
    }
    # The same bytes again store nothing, so they record nothing.
    assert post_otlp(token, body).status_code == 200
    assert AuditEvent.objects.filter(action="trace_otlp.receive").count() == 1
    # A new request is a new event.
    assert post_otlp(token, otlp_body("EEE19B7EC3C1B177")).status_code == 200
    assert AuditEvent.objects.filter(action="trace_otlp.receive").count() == 2


def transcript_line(message_id: str, seconds: int) -> str:
    return json.dumps(
        {
            "type": "assistant",
            "sessionId": "sess-audit",
            "uuid": f"u-{message_id}",
            "parentUuid": None,
            "timestamp": f"2026-03-01T09:00:{seconds:02d}Z",
            "cwd": "/work/project",
            "requestId": f"req-{message_id}",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "hello"}],
                "usage": {
                    "input_tokens": 5,
                    "cache_creation_input_tokens": 100,
                    "cache_read_input_tokens": 1000,
                    "output_tokens": 10,
                },
            },
        }
    )


def test_one_audit_event_per_ingest_traces_run(workspace, tmp_path):
    folder = tmp_path / "transcripts"
    folder.mkdir()
    for index in range(3):
        lines = [transcript_line(f"msg-{index}-{n}", n) for n in range(2)]
        (folder / f"session-{index}.jsonl").write_text("\n".join(lines) + "\n")
    out = io.StringIO()
    call_command("ingest_traces", str(folder), "--workspace", workspace.slug, "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["files"] == 3 and summary["calls"] == 6
    [event] = AuditEvent.objects.filter(action="trace_ingest.cli")
    assert event.actor is None and event.workspace == workspace
    assert event.data["paths"] == 1 and event.data["format"] == "auto"
    assert (event.data["files"], event.data["calls"], event.data["sessions"]) == (3, 6, 1)
    assert event.data["errors"] == 0 and event.data["files_already_ingested"] == 0
    # Running it again is another run: one more event, which says nothing was new.
    call_command("ingest_traces", str(folder), "--workspace", workspace.slug, "--json", stdout=out)
    events = list(AuditEvent.objects.filter(action="trace_ingest.cli").order_by("pk"))
    assert len(events) == 2
    assert (events[1].data["calls"], events[1].data["files_already_ingested"]) == (0, 3)
