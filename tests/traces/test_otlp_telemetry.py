"""POST /v1/logs and /v1/metrics with hand-written OTLP/JSON: what an exporter would not
send (bad records, wrong temporality), Codex events, identity handling, call links."""

import gzip
import json
import zlib

import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from governance.models import AuditEvent
from governance.services import api_token_create
from traces.formats.telemetry import decode
from traces.models import (
    Agent,
    Call,
    RawUpload,
    Session,
    TelemetryEvent,
    TelemetryMetricPoint,
)
from traces.services import telemetry_policy_update

pytestmark = pytest.mark.django_db

T0 = 1_767_225_600_000_000_000
SESSION = "7d9a3c1e-0000-4000-8000-000000000001"


@pytest.fixture
def send(client, workspace, members):
    token = api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext

    def post(signal, document, encoding=None, content_type="application/json", raw=None):
        body = raw if raw is not None else json.dumps(document).encode()
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
        if encoding == "gzip":
            body, headers["HTTP_CONTENT_ENCODING"] = gzip.compress(body), "gzip"
        elif encoding == "deflate":
            body, headers["HTTP_CONTENT_ENCODING"] = zlib.compress(body), "deflate"
        return client.post(f"/v1/{signal}", data=body, content_type=content_type, **headers)

    return post


def value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def attributes(mapping):
    return [{"key": k, "value": value(v)} for k, v in mapping.items()]


def logs(records, resource=None):
    return {"resourceLogs": [{
        "resource": {"attributes": attributes(resource or {"service.name": "claude-code"})},
        "scopeLogs": [{"scope": {"name": "com.anthropic.claude_code.events"}, "logRecords": records}],
    }]}  # fmt: skip


def record(name, offset=0, **attrs):
    return {
        "timeUnixNano": str(T0 + offset * 1_000_000_000),
        "body": {"stringValue": name},
        "attributes": attributes(attrs),
    }


def api_request(offset=0, **overrides):
    attrs = {"session.id": SESSION, "event.name": "api_request", "model": "claude-opus-4-1",
             "input_tokens": 10, "output_tokens": 200, "cache_read_tokens": 5_000,
             "cache_creation_tokens": 700, "cost_usd": 0.05, "request_id": f"req_{offset}",
             "prompt.id": "p-1"}  # fmt: skip
    attrs.update(overrides)
    return record("claude_code.api_request", offset, **attrs)


def partial(response):
    assert response.status_code == 200, response.content
    return response.json().get("partialSuccess", {})


def test_a_record_without_a_session_is_rejected_by_index(send):
    no_session = record("claude_code.api_request", 1, input_tokens=3)
    response = send("logs", logs([api_request(0), no_session, api_request(2)]))
    rejected = partial(response)
    assert rejected["rejectedLogRecords"] == "1"
    assert "resourceLogs[0].scopeLogs[0].logRecords[1]" in rejected["errorMessage"]
    assert "no session" in rejected["errorMessage"]
    assert TelemetryEvent.objects.count() == 2


def test_unknown_event_names_are_kept_and_counted(send):
    strange = record("claude_code.brand_new_event", 1, **{"session.id": SESSION, "x": "y"})
    response = send("logs", logs([api_request(0), strange]))
    assert partial(response) == {}
    kept = TelemetryEvent.objects.get(recognised=False)
    assert kept.name == "claude_code.brand_new_event" and kept.attributes["x"] == "y"
    audit = AuditEvent.objects.get(action="telemetry_otlp.receive_logs")
    assert audit.data["unknown_events"] == 1 and audit.data["events"] == 2


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"input_tokens": -5}, "'input_tokens' is negative (-5)"),
        (
            {"cache_read_tokens": 10**13},
            "'cache_read_tokens' = 10,000,000,000,000 is not plausible",
        ),
        ({"cost_usd": -0.01}, "'cost_usd' is negative"),
        ({"cost_usd": 5e9}, "'cost_usd' = 5000000000.0 is not plausible"),
        ({"duration_ms": "soon"}, "'duration_ms' must be a number"),
    ],
)
def test_negative_and_huge_event_values_are_rejected(send, override, reason):
    response = send("logs", logs([api_request(0), api_request(1, **override)]))
    rejected = partial(response)
    assert rejected["rejectedLogRecords"] == "1" and reason in rejected["errorMessage"]
    assert "logRecords[1]" in rejected["errorMessage"]
    assert list(TelemetryEvent.objects.values_list("request_id", flat=True)) == ["req_0"]


def test_resending_adds_nothing(send):
    document = logs([api_request(0), api_request(1)])
    send("logs", document)
    send("logs", document)  # the same bytes
    send("logs", logs([api_request(1), api_request(2)]), encoding="gzip")  # overlapping
    assert sorted(TelemetryEvent.objects.values_list("request_id", flat=True)) == [
        "req_0",
        "req_1",
        "req_2",
    ]
    assert RawUpload.objects.filter(source="otlp").count() == 2


def test_deflate_and_protobuf_errors(send):
    assert partial(send("logs", logs([api_request(0)]), encoding="deflate")) == {}
    garbage = send("logs", None, raw=b"\xff\xfe", content_type="application/x-protobuf")
    assert garbage.status_code == 400
    assert "ExportLogsServiceRequest" in status_pb2.Status.FromString(garbage.content).message
    assert TelemetryEvent.objects.count() == 1


def test_protobuf_partial_success(send):
    body = decode(
        json.dumps(logs([api_request(0), api_request(1, output_tokens=-1)])).encode(),
        "application/json",
        "logs",
    ).SerializeToString()
    response = send("logs", None, raw=body, content_type="application/x-protobuf")
    answer = ExportLogsServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_log_records == 1
    assert "'output_tokens' is negative" in answer.partial_success.error_message


def test_viewer_tokens_and_anonymous_requests_are_refused(client, workspace, members):
    viewer = api_token_create(workspace=workspace, user=members["viewer"]).plaintext
    body = json.dumps(logs([api_request(0)]))
    denied = client.post("/v1/metrics", data=body, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {viewer}")  # fmt: skip
    anonymous = client.post("/v1/logs", data=body, content_type="application/json")
    assert (denied.status_code, anonymous.status_code) == (403, 401)
    assert "Sending metrics needs the editor role" in denied.json()["message"]


def test_codex_events(send):
    codex = {"service.name": "codex_cli_rs"}
    conversation = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    common = {"conversation.id": conversation, "app.version": "0.63.0"}
    records = [
        record("codex.conversation_starts", 0, **common, context_window=272_000,
               auto_compact_token_limit=244_800, provider_name="openai"),
        record("codex.sse_event", 1, **common, **{"event.kind": "response.output_text.delta"}),
        record("codex.sse_event", 2, **common, **{"event.kind": "response.completed"},
               input_token_count=30_000, cached_token_count=24_000, output_token_count=900,
               reasoning_token_count=400, tool_token_count=0),
        record("codex.sse_event", 3, **common, **{"event.kind": "response.completed"},
               input_token_count=100, cached_token_count=300),
    ]  # fmt: skip
    rejected = partial(send("logs", logs(records, codex)))
    assert rejected["rejectedLogRecords"] == "1" and "logRecords[3]" in rejected["errorMessage"]
    assert "exceeds input_token_count" in rejected["errorMessage"]
    session = Session.objects.get(harness="codex", external_id=conversation)
    assert (session.context_window, session.auto_compact_token_limit) == (272_000, 244_800)
    assert session.started_at.timestamp() == T0 / 1e9  # its earliest event
    assert session.harness_version == "0.63.0"
    completed = TelemetryEvent.objects.get(name="codex.sse_event")
    assert (
        completed.input_tokens,
        completed.cache_read_tokens,
        completed.output_tokens,
        completed.reasoning_tokens,
    ) == (6_000, 24_000, 900, 400)
    audit = AuditEvent.objects.get(action="telemetry_otlp.receive_logs")
    assert audit.data["skipped_stream_events"] == 1 and audit.data["events"] == 2


def test_api_request_links_to_the_transcript_call(send, workspace):
    session = Session.objects.create(
        workspace=workspace, harness="claude-code", external_id=SESSION
    )
    agent = Agent.objects.create(workspace=workspace, session=session, external_id="main")
    call = Call.objects.create(workspace=workspace, session=session, agent=agent,
                               key="msg_01:req_1", timestamp="2026-01-01T00:00:01Z")  # fmt: skip
    partial(send("logs", logs([api_request(1), api_request(2)])))
    linked = dict(TelemetryEvent.objects.values_list("request_id", "call_id"))
    assert linked == {"req_1": call.pk, "req_2": None}
    assert Session.objects.filter(external_id=SESSION).count() == 1


@pytest.mark.parametrize("mode", ["keep", "drop"])
def test_identity_policy_keep_and_drop(send, workspace, members, mode):
    telemetry_policy_update(workspace=workspace, actor=members["admin"], identity=mode)
    resource = {"service.name": "claude-code", "user.email": "dev@example.com"}
    document = logs([api_request(0, **{"user.id": "install-1"})], resource)
    partial(send("logs", document))
    event = TelemetryEvent.objects.get()
    stored = RawUpload.objects.get(source="otlp").file.read()
    if mode == "keep":
        assert event.attributes["user.id"] == "install-1"
        assert stored == json.dumps(document).encode()  # the bytes as received
    else:
        assert "user.id" not in event.attributes
        assert b"dev@example.com" not in stored and b"install-1" not in stored
    assert AuditEvent.objects.filter(action="telemetry_policy.update").count() == 1


# --- metrics --------------------------------------------------------------------------------


def metrics(points, temporality=1, name="claude_code.token.usage", kind="sum"):
    data = {"dataPoints": points}
    if kind == "sum":
        data.update(aggregationTemporality=temporality, isMonotonic=True)
    return {"resourceMetrics": [{
        "resource": {"attributes": attributes({"service.name": "claude-code"})},
        "scopeMetrics": [{"scope": {"name": "com.anthropic.claude_code"},
                          "metrics": [{"name": name, "unit": "tokens", kind: data}]}],
    }]}  # fmt: skip


def point(value, offset, start=0, **attrs):
    labels = {"session.id": SESSION, "type": "input", "model": "claude-opus-4-1", **attrs}
    number = {"asInt": str(value)} if isinstance(value, int) else {"asDouble": value}
    return {"startTimeUnixNano": str(T0 + start * 10**9), "timeUnixNano": str(T0 + offset * 10**9),
            "attributes": attributes(labels), **number}  # fmt: skip


def stored_values():
    return list(
        TelemetryMetricPoint.objects.order_by("time_unix_nano").values_list("value", flat=True)
    )


def test_unspecified_and_unknown_temporality_are_rejected(send):
    for temporality in (0, 7):
        rejected = partial(send("metrics", metrics([point(5, 60)], temporality=temporality)))
        assert rejected["rejectedDataPoints"] == "1"
        assert (
            f"aggregationTemporality {temporality} is not delta (1) or cumulative (2)"
            in (rejected["errorMessage"])
        )
    assert TelemetryMetricPoint.objects.count() == 0


def test_cumulative_becomes_deltas_and_resets_restart(send):
    partial(send("metrics", metrics([point(100, 60), point(160, 120)], temporality=2)))
    partial(send("metrics", metrics([point(175, 180)], temporality=2)))
    # A new start time: the process restarted, so the value is the increase.
    partial(send("metrics", metrics([point(20, 240, start=200)], temporality=2)))
    fell = partial(send("metrics", metrics([point(10, 300, start=200)], temporality=2)))
    assert "cumulative value fell from 20 to 10" in fell["errorMessage"]
    assert stored_values() == [100.0, 60.0, 15.0, 20.0]
    switched = partial(send("metrics", metrics([point(5, 360)], temporality=1)))
    assert "this series was sent as cumulative, this point is delta" in switched["errorMessage"]


def test_negative_huge_and_gauge_usage_points_are_rejected(send):
    document = metrics([point(-3, 60), point(10**12, 61), point(4, 62)])
    rejected = partial(send("metrics", document))
    assert rejected["rejectedDataPoints"] == "2"
    assert (
        "dataPoints[0]: claude_code.token.usage: value -3 is negative" in rejected["errorMessage"]
    )
    assert (
        "dataPoints[1]" in rejected["errorMessage"] and "not plausible" in rejected["errorMessage"]
    )
    gauge = partial(
        send("metrics", metrics([point(1.5, 70)], name="claude_code.cost.usage", kind="gauge"))
    )
    assert "must be a Sum (a counter), got gauge" in gauge["errorMessage"]
    other_gauge = partial(
        send("metrics", metrics([point(3, 80)], name="other.gauge", kind="gauge"))
    )
    assert other_gauge == {}
    assert stored_values() == [4.0]


def test_points_without_a_session_are_stored_for_the_workspace(send):
    document = metrics([{"timeUnixNano": str(T0), "asDouble": 0.5,
                         "attributes": attributes({"model": "m"})}], name="claude_code.cost.usage")  # fmt: skip
    assert partial(send("metrics", document)) == {}
    assert TelemetryMetricPoint.objects.get().session is None


# --- the span path ---------------------------------------------------------------------------


def test_traces_are_stored_redacted_and_compacted_spans_count(send, workspace):
    from traces.models import Compaction

    spans = [
        {"traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "EEE19B7EC3C1B174", "name": "chat",
         "startTimeUnixNano": str(T0), "attributes": attributes({
             "gen_ai.conversation.id": "conv-9", "user.email": "dev@example.com",
             "gen_ai.usage.input_tokens": 12_000, "gen_ai.usage.cache_read.input_tokens": 9_000,
             "gen_ai.usage.cache_write.input_tokens": 2_000, "gen_ai.usage.output_tokens": 30})},
        {"traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "EEE19B7EC3C1B175", "name": "compact",
         "startTimeUnixNano": str(T0 + 10**9),
         "attributes": attributes({"gen_ai.conversation.id": "conv-9", "gen_ai.conversation.compacted": True})},
    ]  # fmt: skip
    document = {"resourceSpans": [{"resource": {"attributes": []},
                                   "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]}  # fmt: skip
    assert partial(send("traces", document)) == {}
    upload = RawUpload.objects.get(source="otlp")
    assert upload.content_type == "application/x-protobuf"  # re-encoded after redaction
    assert b"dev@example.com" not in upload.file.read()
    call = Call.objects.get(session__external_id="conv-9")
    assert (call.input_tokens, call.cache_creation_tokens, call.cache_read_tokens) == (
        1_000,
        2_000,
        9_000,
    )
    assert Compaction.objects.filter(session__external_id="conv-9").count() == 1


def test_up_down_counters_may_go_negative(send):
    document = metrics([point(-3, 60), point(-5, 120)], temporality=2, name="queue.depth")
    document["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["sum"]["isMonotonic"] = False
    assert partial(send("metrics", document)) == {}
    assert stored_values() == [-3.0, -2.0]
