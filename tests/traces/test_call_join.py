"""One call, many sources: a Claude Code transcript, its `api_request` events and its
`claude_code.llm_request` spans, sent by the real OpenTelemetry SDK exporters to the live
server in either order, are one call each; the reconciliation lists what disagrees; the
compaction boundary, the compaction event and a compacted span are one Compaction."""

import json
from decimal import Decimal

import pytest
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from governance.services import api_token_create
from traces.models import Call, CallSource, Compaction, Session, TelemetryEvent
from traces.selectors import session_reconciliation

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "3b7e44a0-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z, seconds
RESOURCE = {"service.name": "claude-code", "service.version": "2.1.240"}


def _iso(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def transcript_lines(calls: int, compaction_at: int | None = None) -> list[dict]:
    """Assistant lines, each call streamed as two lines (the second with the final
    output count), a user prompt between calls, and a compact boundary."""
    lines = []
    parent = None
    for i in range(calls):
        stamp = T0 + i * 10
        if compaction_at is not None and i == compaction_at:
            lines.append({
                "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
                "parentUuid": None, "logicalParentUuid": parent, "uuid": f"boundary-{i:04d}",
                "sessionId": SESSION, "timestamp": _iso(stamp - 5), "isSidechain": False,
                "version": "2.1.240", "compactMetadata": {"trigger": "auto", "preTokens": 150_000},
            })  # fmt: skip
            parent = f"boundary-{i:04d}"
        lines.append({
            "type": "user", "uuid": f"user-{i:04d}", "parentUuid": parent, "sessionId": SESSION,
            "timestamp": _iso(stamp - 1), "isSidechain": False, "version": "2.1.240",
            "message": {"role": "user", "content": f"step {i}"},
        })  # fmt: skip
        parent = f"user-{i:04d}"
        for part, output in enumerate((1, 40 + 7 * i)):
            lines.append({
                "type": "assistant", "uuid": f"asst-{i:04d}-{part}", "parentUuid": parent,
                "sessionId": SESSION, "timestamp": _iso(stamp + part), "isSidechain": False,
                "version": "2.1.240", "requestId": f"req_{i:024d}",
                "message": {
                    "id": f"msg_{i:024d}", "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [{"type": "text", "text": f"answer {i} part {part}"}],
                    "usage": {"input_tokens": 3 + i, "cache_creation_input_tokens": 500 + i,
                              "cache_read_input_tokens": 10_000 + 100 * i, "output_tokens": output},
                },
            })  # fmt: skip
            parent = f"asst-{i:04d}-{part}"
    return lines


def reference_calls(lines: list[dict]) -> dict[str, dict]:
    """Independent of the parser: request id -> the kept counts (the line with the most
    output of each (message id, request id))."""
    kept: dict[str, dict] = {}
    for line in lines:
        if line.get("type") != "assistant":
            continue
        usage = line["message"]["usage"]
        counts = {
            "input_tokens": usage["input_tokens"],
            "cache_creation_tokens": usage["cache_creation_input_tokens"],
            "cache_read_tokens": usage["cache_read_input_tokens"],
            "output_tokens": usage["output_tokens"],
        }
        previous = kept.get(line["requestId"])
        if previous is None or counts["output_tokens"] >= previous["output_tokens"]:
            kept[line["requestId"]] = counts
    return kept


@pytest.fixture
def token(workspace, members):
    return api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext


@pytest.fixture
def transcript(tmp_path, ingest):
    def write_and_ingest(lines):
        path = tmp_path / "projects" / "demo" / f"{SESSION}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return ingest(path)

    return write_and_ingest


def send_events(live_server, token, reference, *, planted=None, compaction=None):
    """api_request events for the reference calls through the SDK's LoggerProvider and
    OTLP/HTTP protobuf log exporter; `planted` = (request id, field, value) changes one."""
    exporter = OTLPLogExporter(
        endpoint=f"{live_server.url}/v1/logs", headers={"Authorization": f"Bearer {token}"}
    )
    provider = LoggerProvider(resource=Resource.create(RESOURCE))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("com.anthropic.claude_code.events", "2.1.240")
    for n, (request_id, counts) in enumerate(sorted(reference.items())):
        attrs = {
            "session.id": SESSION, "event.name": "api_request", "request_id": request_id,
            "model": "claude-sonnet-4-5", "cost_usd": 0.01, "duration_ms": 1500, **counts,
        }  # fmt: skip
        if planted and planted[0] == request_id:
            attrs[planted[1]] = planted[2]
        logger.emit(
            body="claude_code.api_request",
            timestamp=(T0 + n * 10 + 2) * 10**9,
            attributes=attrs,
        )
    if compaction is not None:
        logger.emit(
            body="claude_code.compaction",
            timestamp=compaction["at"] * 10**9,
            attributes={
                "session.id": SESSION, "event.name": "compaction", "trigger": "auto",
                "success": True, "duration_ms": 31_000, "pre_tokens": 148_000,
                "post_tokens": 21_000,
            },
        )  # fmt: skip
    provider.shutdown()


def send_spans(live_server, token, reference):
    """claude_code.llm_request spans through the SDK's TracerProvider and OTLP/HTTP span
    exporter: unprefixed Anthropic counts, `gen_ai.response.id` = the request id."""
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {token}"}
    )
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("com.anthropic.claude_code.tracing", "2.1.240")
    for n, (request_id, counts) in enumerate(sorted(reference.items())):
        start = (T0 + n * 10) * 10**9
        span = tracer.start_span(
            "claude_code.llm_request",
            start_time=start,
            attributes={
                "session.id": SESSION, "span.type": "llm_request", "model": "claude-sonnet-4-5",
                "request_id": request_id, "gen_ai.response.id": request_id, **counts,
            },
        )  # fmt: skip
        span.end(end_time=start + 2 * 10**9)
    provider.shutdown()


def send_compacted_span(live_server, token, at: int):
    """A GenAI span marking the compaction (`gen_ai.conversation.compacted`), no usage."""
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {token}"}
    )
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("t").start_span(
        "compact",
        start_time=at * 10**9,
        attributes={"session.id": SESSION, "gen_ai.conversation.compacted": True},
    )
    span.end(end_time=(at + 30) * 10**9)
    provider.shutdown()


def session():
    return Session.objects.get(harness="claude-code", external_id=SESSION)


def stored_state():
    return (
        Call.objects.count(),
        CallSource.objects.count(),
        TelemetryEvent.objects.count(),
        Compaction.objects.count(),
        sorted(TelemetryEvent.objects.values_list("request_id", "call_id")),
    )


@pytest.mark.parametrize("events_first", [False, True], ids=["transcript-first", "events-first"])
def test_transcript_and_its_events_are_one_call_in_either_order(
    live_server, token, transcript, events_first
):
    lines = transcript_lines(6)
    reference = reference_calls(lines)
    if events_first:
        send_events(live_server, token, reference)
        transcript(lines)
    else:
        transcript(lines)
        send_events(live_server, token, reference)
    calls = {key.split(":")[1]: pk for pk, key in Call.objects.values_list("pk", "key")}
    assert len(calls) == len(reference) == 6  # the transcript's count: events add no call
    # Every event is linked to the call of its request.
    linked = dict(TelemetryEvent.objects.values_list("request_id", "call_id"))
    assert linked == calls
    # Tokens agree: the calls carry the transcript's counts and every source agrees.
    for call in Call.objects.all():
        expected = reference[call.key.split(":")[1]]
        assert {f: getattr(call, f) for f in expected} == expected
    result = session_reconciliation(session=session())
    assert result.by_source == {"transcript": 6, "event": 6}
    assert result.joined == 6 and result.disagreements == [] and result.single_source == []
    assert result.cost_usd["event"] == Decimal("0.06")
    assert (
        result.totals["event"]
        == result.totals["transcript"]
        == {f: sum(c[f] for c in reference.values()) for f in next(iter(reference.values()))}
    )
    # Re-sending anything adds nothing.
    before = stored_state()
    send_events(live_server, token, reference)
    transcript(lines)
    assert stored_state() == before


def test_a_planted_disagreement_appears_in_the_reconciliation(
    live_server, token, transcript, client, workspace, members
):
    lines = transcript_lines(4)
    reference = reference_calls(lines)
    planted = sorted(reference)[2]
    send_events(live_server, token, reference, planted=(planted, "cache_read_tokens", 12_345))
    # An event of a request the transcript does not have: seen in one source only.
    send_events(live_server, token, {"req_orphan_0000000000000": reference[planted]})
    transcript(lines)
    result = session_reconciliation(session=session())
    (disagreement,) = result.disagreements
    assert disagreement.field == "cache_read_tokens"
    assert disagreement.values == {
        "transcript": reference[planted]["cache_read_tokens"],
        "event": 12_345,
    }
    assert disagreement.key == f"msg_{int(planted[4:]):024d}:{planted}"
    assert [(s.source, s.key) for s in result.single_source] == [
        ("event", "req_orphan_0000000000000")
    ]
    # The API says the same, in the workspace only.
    client.force_login(members["viewer"])
    pk = session().pk
    body = client.get(f"/api/v1/sessions/{pk}/reconciliation/").json()
    assert body["disagreements"][0]["values"] == disagreement.values
    assert body["disagreements"][0]["field"] == "cache_read_tokens"
    assert body["single_source_total"] == 1
    page = client.get(f"/w/{workspace.slug}/traces/sessions/{pk}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "12,345" in text and "cache read" in text


@pytest.mark.parametrize("spans_first", [False, True], ids=["transcript-first", "spans-first"])
def test_spans_and_the_transcript_are_one_call(live_server, token, transcript, spans_first):
    lines = transcript_lines(5)
    reference = reference_calls(lines)
    if spans_first:
        send_spans(live_server, token, reference)
        assert Call.objects.count() == 5  # span-only calls until the transcript arrives
        send_events(live_server, token, reference)
        transcript(lines)
    else:
        transcript(lines)
        send_spans(live_server, token, reference)
        send_events(live_server, token, reference)
    assert Session.objects.count() == 1
    calls = {key.split(":")[1]: pk for pk, key in Call.objects.values_list("pk", "key")}
    assert len(calls) == 5 and all(
        key.startswith("msg_") for key in Call.objects.values_list("key", flat=True)
    )
    assert dict(CallSource.objects.values_list("key", "call_id")) == calls
    assert dict(TelemetryEvent.objects.values_list("request_id", "call_id")) == calls
    for source in CallSource.objects.all():
        expected = reference[source.key]
        assert {f: getattr(source, f) for f in expected} == expected
    # The folded span-only calls are gone from the session's totals too.
    assert session().call_count == 5
    result = session_reconciliation(session=session())
    assert result.by_source == {"transcript": 5, "span": 5, "event": 5}
    assert result.disagreements == [] and result.single_source == []
    before = stored_state()
    send_spans(live_server, token, reference)
    assert stored_state() == before


@pytest.mark.parametrize("event_first", [False, True], ids=["transcript-first", "event-first"])
def test_the_boundary_and_the_compaction_event_are_one_compaction(
    live_server, token, transcript, event_first
):
    lines = transcript_lines(4, compaction_at=2)
    reference = reference_calls(lines)
    compaction = {"at": T0 + 2 * 10 - 2}  # 3 s after the boundary
    if event_first:
        send_events(live_server, token, reference, compaction=compaction)
        assert Compaction.objects.get().key.startswith("event:")
        send_compacted_span(live_server, token, T0 + 2 * 10 - 6)
        assert Compaction.objects.count() == 1  # the span joins the event's compaction
        transcript(lines)
    else:
        transcript(lines)
        send_events(live_server, token, reference, compaction=compaction)
        send_compacted_span(live_server, token, T0 + 2 * 10 - 6)
    assert Session.objects.count() == 1
    stored = Compaction.objects.get()
    assert stored.key == "boundary:boundary-0002"
    assert (stored.trigger, stored.pre_tokens, stored.duration_ms, stored.success) == (
        "auto",
        150_000,
        31_000,
        True,
    )
    assert stored.sources == "event span transcript"
    before = stored_state()
    send_events(live_server, token, reference, compaction=compaction)
    send_compacted_span(live_server, token, T0 + 2 * 10 - 6)
    transcript(lines)
    assert stored_state() == before
    assert Compaction.objects.get().duration_ms == 31_000


def test_reconciliation_is_scoped_to_the_workspace(
    client, workspace, other_workspace, members, outsider
):
    from traces.models import Agent

    mine = Session.objects.create(workspace=workspace, harness="claude-code", external_id=SESSION)
    agent = Agent.objects.create(workspace=workspace, session=mine, external_id="main")
    Call.objects.create(workspace=workspace, session=mine, agent=agent, key="msg_1:req_1",
                        timestamp="2026-01-01T00:00:00Z", source_line=1, output_tokens=5)  # fmt: skip
    client.force_login(outsider)
    assert client.get(f"/api/v1/sessions/{mine.pk}/reconciliation/").status_code == 404
    assert client.get(f"/w/{workspace.slug}/traces/reconciliation/").status_code == 404
    page = client.get(f"/w/{other_workspace.slug}/traces/reconciliation/")
    assert page.status_code == 200 and b"No telemetry to compare yet" in page.content
    client.force_login(members["viewer"])
    body = client.get(f"/api/v1/sessions/{mine.pk}/reconciliation/").json()
    assert body["by_source"] == {"transcript": 1} and body["single_source"] == []
    schema = client.get("/api/schema/").content.decode()
    assert "/api/v1/sessions/{id}/reconciliation/" in schema
