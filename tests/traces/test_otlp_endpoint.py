"""POST /v1/traces against the live server: the real OpenTelemetry exporters (protobuf and
JSON), and hand-written JSON for what an exporter would not send."""

import gzip
import http.client
import json
import zlib

import pytest
import requests
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.common.http import Compression as JsonCompression
from opentelemetry.exporter.otlp.json.http.trace_exporter import (
    OTLPSpanExporter as JsonSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from governance.services import api_token_create
from traces.models import Call, RawUpload, Session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(workspace, members):
    return api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext


def send_spans(url, token, compression, exporter_class=OTLPSpanExporter):
    exporter = exporter_class(
        endpoint=f"{url}/v1/traces",
        headers={"Authorization": f"Bearer {token}"},
        compression=compression,
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-gateway"}))
    results = []

    class Recording(SimpleSpanProcessor):
        def on_end(self, span):
            results.append(self.span_exporter.export((span,)))

    provider.add_span_processor(Recording(exporter))
    tracer = provider.get_tracer("gateway", "0.9")
    for step in range(3):
        with tracer.start_as_current_span("chat claude-sonnet-4") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.conversation.id", "conv-42")
            span.set_attribute("gen_ai.response.model", "claude-sonnet-4")
            span.set_attribute("gen_ai.response.id", f"msg_{step}")
            span.set_attribute("gen_ai.usage.input_tokens", 20_000 + 1_000 * step)
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", 18_000)
            span.set_attribute("gen_ai.usage.output_tokens", 150)
    with tracer.start_as_current_span("execute_tool Read"):
        pass
    provider.shutdown()
    return results


@pytest.mark.parametrize(
    ("exporter_class", "compression"),
    [
        (OTLPSpanExporter, Compression.NoCompression),
        (OTLPSpanExporter, Compression.Gzip),
        (JsonSpanExporter, JsonCompression.NONE),
        (JsonSpanExporter, JsonCompression.GZIP),
        (JsonSpanExporter, JsonCompression.DEFLATE),
    ],
    ids=["protobuf", "protobuf-gzip", "json", "json-gzip", "json-deflate"],
)
def test_sdk_exporter(live_server, token, exporter_class, compression):
    results = send_spans(live_server.url, token, compression, exporter_class)
    assert results == [SpanExportResult.SUCCESS] * 4
    session = Session.objects.get(harness="otlp", external_id="conv-42")
    calls = list(Call.objects.filter(session=session).order_by("timestamp"))
    assert [c.context_tokens for c in calls] == [20_000, 21_000, 22_000]
    assert next((c.input_tokens, c.cache_read_tokens, c.output_tokens) for c in calls) == (
        2_000,
        18_000,
        150,
    )
    assert (
        session.call_count == 3
        and session.project == "agent-gateway"
        and session.model_names == ["claude-sonnet-4"]
    )
    assert RawUpload.objects.filter(source="otlp").count() == 4


def json_body(spans):
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": []},
                    "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}],
                }
            ]
        }
    ).encode()


def llm_span(span_id, tokens):
    return {
        "traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": span_id, "name": "chat", "startTimeUnixNano": "1767225600000000000",
        "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": tokens}},
                       {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "7"}}],
    }  # fmt: skip


def test_json_with_partial_success(live_server, token):
    body = json_body(
        [
            llm_span("EEE19B7EC3C1B174", "900"),
            llm_span("EEE19B7EC3C1B175", "-3"),
            llm_span("7u4Zt+zBsXQ=", "500"),
        ]
    )
    response = requests.post(
        f"{live_server.url}/v1/traces",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert (
        "eee19b7ec3c1b175" in partial["errorMessage"]
        and "non-negative integer" in partial["errorMessage"]
    )
    assert sorted(Call.objects.values_list("context_tokens", flat=True)) == [
        500,
        900,
    ]  # base64 and hex ids both accepted


def test_json_gzip_and_success_body(live_server, token):
    body = gzip.compress(json_body([llm_span("EEE19B7EC3C1B174", "900")]))
    response = requests.post(f"{live_server.url}/v1/traces", data=body, timeout=10, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "Content-Encoding": "gzip"})  # fmt: skip
    assert response.status_code == 200 and response.json() == {}


def test_errors_follow_the_spec(live_server, token, members, workspace):
    url = f"{live_server.url}/v1/traces"
    protobuf = {"Content-Type": "application/x-protobuf"}
    anonymous = requests.post(url, data=b"", headers=protobuf, timeout=10)
    assert (
        anonymous.status_code == 401
        and anonymous.headers["Content-Type"] == "application/x-protobuf"
    )
    status = status_pb2.Status.FromString(anonymous.content)
    assert status.code == 16 and "Bearer" in status.message
    garbage = requests.post(
        url,
        data=b"\xff\xfe not protobuf",
        headers={**protobuf, "Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert (
        garbage.status_code == 400
        and "protobuf" in status_pb2.Status.FromString(garbage.content).message
    )
    bad_json = requests.post(
        url,
        data=b"{",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["message"]
    wrong_type = requests.post(
        url,
        data=b"x",
        headers={"Content-Type": "text/plain", "Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert wrong_type.status_code == 415
    viewer = api_token_create(workspace=workspace, user=members["viewer"]).plaintext
    denied = requests.post(
        url, data=b"", headers={**protobuf, "Authorization": f"Bearer {viewer}"}, timeout=10
    )
    assert denied.status_code == 403
    assert Call.objects.count() == 0


def test_oversized_bodies_get_413(live_server, token):
    host, port = live_server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.putrequest("POST", "/v1/traces")
    connection.putheader("Content-Type", "application/x-protobuf")
    connection.putheader("Authorization", f"Bearer {token}")
    connection.putheader("Content-Length", str(65 * 1024 * 1024))
    connection.endheaders()
    connection.send(b"\x00" * 1024)
    response = connection.getresponse()
    assert response.status == 413
    assert "exceeds" in status_pb2.Status.FromString(response.read()).message
    connection.close()
    bomb = gzip.compress(b"\x00" * (65 * 1024 * 1024))
    assert len(bomb) < 100_000
    inflated = requests.post(f"{live_server.url}/v1/traces", data=bomb, timeout=30, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})  # fmt: skip
    assert inflated.status_code == 413
    assert "Decompressed body exceeds" in status_pb2.Status.FromString(inflated.content).message
    for encoding, body, status, message in [
        ("deflate", zlib.compress(b"\x00" * (65 * 1024 * 1024)), 413, "Decompressed body exceeds"),
        ("deflate", b"not deflate", 400, "Body is not valid deflate"),
        ("br", b"x", 415, "Unsupported Content-Encoding 'br'; use gzip or deflate."),
    ]:
        response = requests.post(f"{live_server.url}/v1/traces", data=body, timeout=30, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf", "Content-Encoding": encoding})  # fmt: skip
        assert response.status_code == status
        assert message in status_pb2.Status.FromString(response.content).message


def test_empty_protobuf_request_is_a_success(live_server, token):
    response = requests.post(f"{live_server.url}/v1/traces", data=b"", timeout=10,
                             headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"})  # fmt: skip
    assert response.status_code == 200
    assert (
        ExportTraceServiceResponse.FromString(response.content).partial_success.rejected_spans == 0
    )


def test_resent_and_repeated_spans_are_counted_as_duplicates(live_server, token):
    from governance.models import AuditEvent

    def post(spans):
        return requests.post(f"{live_server.url}/v1/traces", data=json_body(spans), timeout=10,
                             headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})  # fmt: skip

    # Two spans of one call (same trace and span id) in a request, then the batch resent
    # with one new span: a retrying exporter.
    assert post([llm_span("EEE19B7EC3C1B174", "900"), llm_span("EEE19B7EC3C1B174", "900")]).ok
    assert post([llm_span("EEE19B7EC3C1B174", "900"), llm_span("EEE19B7EC3C1B176", "950")]).ok
    assert Call.objects.count() == 2
    events = AuditEvent.objects.filter(action="trace_otlp.receive").order_by("id")
    assert [(e.data["calls"], e.data["duplicate_spans"]) for e in events] == [(1, 1), (1, 1)]


def test_an_undecodable_body_is_refused_and_kept(live_server, token):
    response = requests.post(f"{live_server.url}/v1/traces", data=b"{not json", timeout=10,
                             headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})  # fmt: skip
    assert response.status_code == 400
    (kept,) = RawUpload.objects.filter(source="otlp")
    assert kept.size == len(b"{not json") and Call.objects.count() == 0
