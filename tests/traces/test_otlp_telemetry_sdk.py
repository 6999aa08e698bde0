"""POST /v1/logs and /v1/metrics against the live server, sent by the real OpenTelemetry
SDK: a LoggerProvider with the OTLP log exporter (http/protobuf and http/json) and a
MeterProvider with the OTLP metric exporter (delta and cumulative)."""

from decimal import Decimal

import pytest
from opentelemetry.exporter.otlp.json.http._log_exporter import (
    OTLPLogExporter as JsonLogExporter,
)
from opentelemetry.exporter.otlp.json.http.metric_exporter import (
    OTLPMetricExporter as JsonMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExportResult
from opentelemetry.sdk.metrics import Counter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from governance.services import api_token_create
from traces.formats.telemetry import identity_hash
from traces.models import RawUpload, Session, TelemetryEvent, TelemetryMetricPoint
from traces.services import telemetry_policy_for

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "5f0c6c2e-8a43-4a53-9d43-6f3f2d1b7e10"
RESOURCE = {
    "service.name": "claude-code",
    "service.version": "2.1.240",
    "user.email": "dev@example.com",
    "organization.id": "org-123",
}


@pytest.fixture
def token(workspace, members):
    return api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext


def recording(exporter_class, results):
    class Recording(exporter_class):
        def export(self, batch, **options):
            outcome = super().export(batch, **options)
            results.append(outcome)
            return outcome

    return Recording


def claude_code_events(logger):
    common = {"session.id": SESSION, "app.version": "2.1.240", "user.account_uuid": "acc-9"}
    for step in range(3):
        logger.emit(
            body="claude_code.api_request",
            timestamp=1_767_225_600_000_000_000 + step * 1_000_000_000,
            attributes={
                **common, "event.name": "api_request", "prompt.id": "prompt-1",
                "model": "claude-sonnet-4-5", "cost_usd": 0.0123 + step / 1000,
                "duration_ms": 2100, "input_tokens": 12, "output_tokens": 300 + step,
                "cache_read_tokens": 40_000 + 1_000 * step, "cache_creation_tokens": 900,
                "request_id": f"req_{step:03d}", "query_source": "repl_main_thread",
            },
        )  # fmt: skip
    logger.emit(
        body="claude_code.compaction",
        timestamp=1_767_225_700_000_000_000,
        attributes={**common, "event.name": "compaction", "trigger": "auto", "success": True,
                    "duration_ms": 31_000, "pre_tokens": 160_000, "post_tokens": 21_000},
    )  # fmt: skip
    logger.emit(
        body="claude_code.hook_execution_start",  # not read into columns: kept and counted
        timestamp=1_767_225_701_000_000_000,
        attributes={**common, "event.name": "hook_execution_start", "hook_event": "Stop"},
    )


@pytest.mark.parametrize(
    "exporter_class", [OTLPLogExporter, JsonLogExporter], ids=["http-protobuf", "http-json"]
)
def test_logger_provider_events_are_stored(live_server, token, workspace, exporter_class):
    results = []
    exporter = recording(exporter_class, results)(
        endpoint=f"{live_server.url}/v1/logs", headers={"Authorization": f"Bearer {token}"}
    )
    provider = LoggerProvider(resource=Resource.create(RESOURCE))
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    claude_code_events(provider.get_logger("com.anthropic.claude_code.events", "2.1.240"))
    provider.shutdown()
    assert results == [LogRecordExportResult.SUCCESS]

    session = Session.objects.get(harness="claude-code", external_id=SESSION)
    assert session.harness_version == "2.1.240"
    events = list(TelemetryEvent.objects.filter(session=session).order_by("timestamp"))
    assert [e.name for e in events] == ["claude_code.api_request"] * 3 + [
        "claude_code.compaction",
        "claude_code.hook_execution_start",
    ]
    assert [e.recognised for e in events] == [True, True, True, True, False]
    first = events[0]
    assert (
        first.input_tokens,
        first.output_tokens,
        first.cache_read_tokens,
        first.cache_creation_tokens,
    ) == (12, 300, 40_000, 900)
    assert first.cost_usd == Decimal("0.0123") and first.duration_ms == 2100
    assert (first.request_id, first.prompt_id, first.model, first.query_source) == (
        "req_000",
        "prompt-1",
        "claude-sonnet-4-5",
        "repl_main_thread",
    )
    assert events[3].duration_ms == 31_000 and events[3].attributes["pre_tokens"] == 160_000
    # Identity is hashed by default, with the workspace's key: in the rows and in the body.
    key = telemetry_policy_for(workspace=workspace).identity_key
    assert first.attributes["user.account_uuid"] == identity_hash("acc-9", key)
    upload = RawUpload.objects.get(source="otlp")
    stored = upload.file.read()
    assert b"dev@example.com" not in stored and b"acc-9" not in stored and b"org-123" not in stored
    assert identity_hash("dev@example.com", key).encode() in stored


@pytest.mark.parametrize(
    ("exporter_class", "temporality"),
    [
        (OTLPMetricExporter, AggregationTemporality.DELTA),
        (OTLPMetricExporter, AggregationTemporality.CUMULATIVE),
        (JsonMetricExporter, AggregationTemporality.CUMULATIVE),
    ],
    ids=["protobuf-delta", "protobuf-cumulative", "json-cumulative"],
)
def test_meter_provider_usage_is_stored_as_deltas(live_server, token, exporter_class, temporality):
    results = []
    exporter = recording(exporter_class, results)(
        endpoint=f"{live_server.url}/v1/metrics",
        headers={"Authorization": f"Bearer {token}"},
        preferred_temporality={Counter: temporality},
    )
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    provider = MeterProvider(resource=Resource.create(RESOURCE), metric_readers=[reader])
    meter = provider.get_meter("com.anthropic.claude_code", "2.1.240")
    tokens = meter.create_counter("claude_code.token.usage", unit="tokens")
    cost = meter.create_counter("claude_code.cost.usage", unit="USD")
    labels = {"session.id": SESSION, "model": "claude-sonnet-4-5", "query_source": "main"}
    tokens.add(1_000, {**labels, "type": "input"})
    tokens.add(40_000, {**labels, "type": "cacheRead"})
    cost.add(0.25, labels)
    provider.force_flush()
    tokens.add(500, {**labels, "type": "input"})
    cost.add(0.5, labels)
    provider.force_flush()
    provider.shutdown()
    assert results and all(r == MetricExportResult.SUCCESS for r in results)

    def series(name, **filters):
        return list(
            TelemetryMetricPoint.objects.filter(name=name, **filters)
            .order_by("time_unix_nano")
            .values_list("value", "cumulative_value", "temporality")
        )

    kind = "delta" if temporality == AggregationTemporality.DELTA else "cumulative"
    inputs = series("claude_code.token.usage", type="input")
    if kind == "delta":
        assert inputs == [(1_000.0, None, "delta"), (500.0, None, "delta")]
    else:
        # Cumulative exports repeat unchanged totals (at shutdown too): their increase is 0.
        assert inputs[:2] == [(1_000.0, 1_000.0, kind), (500.0, 1_500.0, kind)]
        assert [v for v, _, _ in inputs[2:]] == [0.0] * (len(inputs) - 2)
    assert [v for v, _, _ in series("claude_code.cost.usage") if v] == [0.25, 0.5]
    assert sum(v for v, _, _ in series("claude_code.token.usage", type="cacheRead")) == 40_000
    point = TelemetryMetricPoint.objects.filter(type="input").first()
    assert point.session.external_id == SESSION and point.session.harness == "claude-code"
    assert point.model == "claude-sonnet-4-5" and point.query_source == "main"
