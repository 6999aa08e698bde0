"""Spans from another producer (a gateway's GenAI instrumentation, not Claude Code's own)
whose `gen_ai.conversation.id` is a Claude Code session id join that session and its
calls, sent by the real OpenTelemetry SDK span exporter to the live server in any order
with the transcript and the `api_request` events; re-sending adds nothing. Every count is
checked against a reference computed here from the generated lines."""

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.traces.test_call_join import (
    SESSION,
    T0,
    reference_calls,
    send_events,
    stored_state,
    transcript_lines,
)
from traces.models import Agent, Call, CallSource, Session, TelemetryEvent

pytestmark = pytest.mark.django_db(transaction=True)

GATEWAY = {"service.name": "llm-gateway", "service.version": "4.2.0"}
CLASSES = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens")


@pytest.fixture
def token(workspace, members):
    from governance.services import api_token_create

    return api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext


@pytest.fixture
def transcript(tmp_path, ingest):
    import json

    def write_and_ingest(lines):
        path = tmp_path / "projects" / "demo" / f"{SESSION}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return ingest(path)

    return write_and_ingest


def message_ids(lines) -> dict[str, str]:
    """request id -> message id, from the generated lines."""
    return {
        line["requestId"]: line["message"]["id"] for line in lines if line["type"] == "assistant"
    }


def send_gateway_spans(live_server, token, reference, messages):
    """GenAI `chat` spans as a gateway emits them: `gen_ai.usage.input_tokens` includes
    the cache counts, `gen_ai.response.id` is the message id, the session is named only by
    `gen_ai.conversation.id`."""
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {token}"}
    )
    provider = TracerProvider(resource=Resource.create(GATEWAY))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("gateway.genai", "4.2.0")
    for n, (request_id, counts) in enumerate(sorted(reference.items())):
        start = (T0 + n * 10) * 10**9
        span = tracer.start_span(
            "chat claude-sonnet-4-5",
            start_time=start,
            attributes={
                "gen_ai.conversation.id": SESSION, "gen_ai.provider.name": "anthropic",
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.response.id": messages[request_id],
                "gen_ai.usage.input_tokens": counts["input_tokens"]
                + counts["cache_read_tokens"] + counts["cache_creation_tokens"],
                "gen_ai.usage.cache_read.input_tokens": counts["cache_read_tokens"],
                "gen_ai.usage.cache_write.input_tokens": counts["cache_creation_tokens"],
                "gen_ai.usage.output_tokens": counts["output_tokens"],
            },
        )  # fmt: skip
        span.end(end_time=start + 2 * 10**9)
    provider.shutdown()


ORDERS = {
    "transcript-spans": ("transcript", "spans"),
    "spans-transcript": ("spans", "transcript"),
    "spans-events-transcript": ("spans", "events", "transcript"),
    "events-spans-transcript": ("events", "spans", "transcript"),
}


@pytest.mark.parametrize("order", list(ORDERS))
def test_gateway_spans_join_the_claude_code_session_in_any_order(
    live_server, token, transcript, order
):
    lines = transcript_lines(5)
    reference = reference_calls(lines)
    messages = message_ids(lines)
    steps = {
        "transcript": lambda: transcript(lines),
        "spans": lambda: send_gateway_spans(live_server, token, reference, messages),
        "events": lambda: send_events(live_server, token, reference),
    }
    for step in ORDERS[order]:
        steps[step]()
        # Whatever arrived so far is one session: the harness's once it is known.
        assert Session.objects.count() == 1

    session = Session.objects.get()
    assert (session.harness, session.external_id) == ("claude-code", SESSION)
    # Calls: the transcript's, each once; agents: the transcript's one main agent.
    keys = dict(Call.objects.values_list("key", "id"))
    assert sorted(keys) == sorted(f"{messages[r]}:{r}" for r in reference)
    assert list(Agent.objects.values_list("external_id", flat=True)) == ["main"]
    # The span of each call is kept as a source of that call, with every token class.
    by_message = {messages[r]: r for r in reference}
    spans = {s.key: s for s in CallSource.objects.filter(source="span")}
    assert set(spans) == set(by_message)
    for message, source in spans.items():
        request_id = by_message[message]
        assert source.call_id == keys[f"{message}:{request_id}"]
        assert {c: getattr(source, c) for c in CLASSES} == reference[request_id]
    # The calls carry the transcript's counts; the session's totals are the reference's.
    for call in Call.objects.all():
        assert {c: getattr(call, c) for c in CLASSES} == reference[call.key.split(":")[1]]
    if "events" in ORDERS[order]:
        linked = dict(TelemetryEvent.objects.values_list("request_id", "call_id"))
        assert linked == {r: keys[f"{messages[r]}:{r}"] for r in reference}
    # Re-sending anything adds nothing.
    before = stored_state()
    for step in ORDERS[order]:
        steps[step]()
    assert stored_state() == before
    assert Session.objects.count() == 1 and Agent.objects.count() == 1


def test_gateway_spans_of_an_unknown_conversation_stay_in_their_own_session(live_server, token):
    reference = reference_calls(transcript_lines(2))
    messages = {r: f"msg_gw_{i:020d}" for i, r in enumerate(sorted(reference))}
    send_gateway_spans(live_server, token, reference, messages)
    session = Session.objects.get()
    assert (session.harness, session.external_id) == ("otlp", SESSION)
    assert Call.objects.count() == 2


def with_hour_split(lines: list[dict]) -> dict[str, int]:
    """Give every assistant line a cache-write breakdown (a third of the writes at the
    1-hour TTL); returns request id -> 1-hour writes, as the reference."""
    hour = {}
    for line in lines:
        if line.get("type") != "assistant":
            continue
        usage = line["message"]["usage"]
        writes = usage["cache_creation_input_tokens"]
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": writes - writes // 3,
            "ephemeral_1h_input_tokens": writes // 3,
        }
        hour[line["requestId"]] = writes // 3
    return hour


@pytest.mark.parametrize("spans_first", [False, True], ids=["transcript-first", "spans-first"])
def test_the_transcripts_hour_split_survives_the_span_join(
    live_server, token, transcript, spans_first
):
    """Spans carry no 1-hour split: a call keeps the transcript's, in either order; a call
    known only from spans has none (all its writes at the 5-minute rate)."""
    from traces.pricing.selectors import usage_of

    lines = transcript_lines(4)
    hour = with_hour_split(lines)
    reference = reference_calls(lines)
    messages = message_ids(lines)
    if spans_first:
        send_gateway_spans(live_server, token, reference, messages)
        for call in Call.objects.all():  # span-only calls: no split to read
            usage = usage_of(call)
            assert (call.cache_creation_1h_tokens, usage.cache_write_1h) == (0, 0)
            assert usage.cache_write_5m == call.cache_creation_tokens > 0
        transcript(lines)
    else:
        transcript(lines)
        send_gateway_spans(live_server, token, reference, messages)
    assert Call.objects.count() == len(reference) == 4
    for call in Call.objects.all():
        request_id = call.key.split(":")[1]
        assert call.cache_creation_1h_tokens == hour[request_id]
        usage = usage_of(call)
        assert (usage.cache_write_1h, usage.cache_write_5m) == (
            hour[request_id],
            reference[request_id]["cache_creation_tokens"] - hour[request_id],
        )


@pytest.mark.parametrize("codex_first", [True, False], ids=["codex-first", "spans-first"])
def test_spans_naming_a_codex_conversation_join_it(client, workspace, token, codex_first):
    """The Codex session is made here by a `codex.conversation_starts` event; the gateway's
    span names its conversation id."""
    import json

    conversation = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    def span():
        attrs = {"gen_ai.conversation.id": conversation, "gen_ai.provider.name": "openai",
                 "gen_ai.response.id": "resp_0001", "gen_ai.request.model": "gpt-5-codex",
                 "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.cache_read.input_tokens": 1000,
                 "gen_ai.usage.output_tokens": 80}  # fmt: skip
        document = {"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "gw"}}]},
            "scopeSpans": [{"spans": [{
                "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
                "name": "chat gpt-5-codex", "startTimeUnixNano": str(T0 * 10**9),
                "endTimeUnixNano": str((T0 + 1) * 10**9),
                "attributes": [{"key": k, "value": {"stringValue": v} if isinstance(v, str)
                                else {"intValue": str(v)}} for k, v in attrs.items()],
            }]}],
        }]}  # fmt: skip
        response = client.post(
            "/v1/traces", data=json.dumps(document), content_type="application/json", **headers
        )
        assert response.status_code == 200, response.content

    def codex_event():
        document = {"resourceLogs": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "codex_cli_rs"}}]},
            "scopeLogs": [{"logRecords": [{
                "timeUnixNano": str(T0 * 10**9), "eventName": "codex.conversation_starts",
                "attributes": [
                    {"key": "conversation.id", "value": {"stringValue": conversation}},
                    {"key": "context_window", "value": {"intValue": "272000"}},
                ],
            }]}],
        }]}  # fmt: skip
        response = client.post(
            "/v1/logs", data=json.dumps(document), content_type="application/json", **headers
        )
        assert response.status_code == 200, response.content

    for step in (codex_event, span) if codex_first else (span, codex_event):
        step()
    session = Session.objects.get()
    assert (session.harness, session.external_id, session.context_window) == (
        "codex",
        conversation,
        272_000,
    )
    call = Call.objects.get()
    assert (call.session_id, call.key) == (session.pk, "resp_0001")
    assert (call.input_tokens, call.cache_read_tokens, call.output_tokens) == (200, 1000, 80)
    assert Agent.objects.count() == 1
