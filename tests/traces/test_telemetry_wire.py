"""The lean reading of OTLP log requests (`traces.formats.telemetry.wire`) against a
reference reading written here with the generated opentelemetry-proto classes: every value
kind, long keys and values (multi-byte lengths), repeated keys, identity attributes on the
resource, scope and record under keep, hash and drop; the re-encoded (redacted) request;
broken attribute bytes. No database."""

import math

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from traces.formats.telemetry import (
    LeanLogsRequest,
    decode,
    decode_logs,
    encoded,
    identity_hash,
    normalise_logs,
)

T0 = 1_767_225_600_000_000_000
SALT = "workspace-key"
IDENTITY = {"user.email", "user.account_uuid", "user.account_id", "user.id", "organization.id"}


def any_value(v) -> AnyValue:
    if v is None:
        return AnyValue()
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, bytes):
        return AnyValue(bytes_value=v)
    if isinstance(v, list):
        return AnyValue(array_value=ArrayValue(values=[any_value(x) for x in v]))
    if isinstance(v, dict):
        return AnyValue(
            kvlist_value=KeyValueList(
                values=[KeyValue(key=k, value=any_value(x)) for k, x in v.items()]
            )
        )
    return AnyValue(string_value=v)


def reference_value(value: AnyValue):
    """What a stored attribute holds, read here with the generated classes."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    raw = getattr(value, kind)
    if kind == "double_value" and not math.isfinite(raw):
        return str(raw)
    if kind == "array_value":
        return [reference_value(x) for x in raw.values]
    if kind == "kvlist_value":
        return {kv.key: reference_value(kv.value) for kv in raw.values}
    if kind == "bytes_value":
        return raw.hex()
    return raw


def reference_attributes(attributes, mode: str) -> dict:
    out = {}
    for kv in attributes:
        out[kv.key] = reference_value(kv.value)
    for key in IDENTITY & set(out):
        if mode == "drop":
            del out[key]
        elif mode == "hash":
            out[key] = identity_hash(str(out[key]), SALT)
    return out


VALUES = [
    "", "plain", "ünïcødé ✓", "x" * 200, "y" * 20_000, 0, 1, -1, 300, 2**63 - 1, -(2**63),
    0.0, -1.5, 1e300, math.nan, math.inf, -math.inf, True, False, b"\x00\xff",
    [1, "a", [2.5, None]], {"a": 1, "b": {"c": "d"}}, None,
]  # fmt: skip


def attrs_for(i: int) -> list[KeyValue]:
    items = [
        KeyValue(key="session.id", value=any_value(f"session-{i % 3}")),
        KeyValue(key="event.name", value=any_value("api_request")),
        KeyValue(key="request_id", value=any_value(f"req_{i}")),
        KeyValue(key=f"value.{i % len(VALUES)}", value=any_value(VALUES[i % len(VALUES)])),
        KeyValue(key="k" * (130 + i % 3), value=any_value(i)),  # a key over 127 bytes
        KeyValue(key="no.value"),  # a KeyValue without its value
        KeyValue(key="user.email", value=any_value(f"dev{i % 4}@example.com")),
    ]
    if i % 5 == 0:
        items.append(KeyValue(key="user.id", value=any_value(i)))  # an int identity value
    if i % 7 == 0:
        items.append(KeyValue(key="request_id", value=any_value("repeated")))  # last one wins
        items.append(KeyValue(key="user.email", value=any_value("second@example.com")))
    return items


def request(records: int) -> ExportLogsServiceRequest:
    logs = []
    for i in range(records):
        record = LogRecord(
            time_unix_nano=T0 + i,
            attributes=attrs_for(i),
            severity_text="INFO",  # not read: kept when the request is re-encoded
            trace_id=bytes(range(16)),
        )
        if i % 3 == 0:
            record.event_name = "claude_code.api_request"
        elif i % 3 == 1:
            record.body.string_value = "claude_code.api_request"
        logs.append(record)
    resource = Resource(
        attributes=[
            KeyValue(key="service.name", value=any_value("claude-code")),
            KeyValue(key="organization.id", value=any_value("org-1")),
        ]
    )
    scope = InstrumentationScope(
        name="com.anthropic.claude_code.events",
        attributes=[KeyValue(key="user.account_uuid", value=any_value("acc-1"))],
    )
    return ExportLogsServiceRequest(
        resource_logs=[
            ResourceLogs(resource=resource, scope_logs=[ScopeLogs(scope=scope, log_records=logs)])
        ]
    )


@pytest.mark.parametrize("mode", ["keep", "hash", "drop"])
@pytest.mark.parametrize("content_type", ["application/x-protobuf", "application/json"])
def test_lean_and_json_reading_match_the_generated_classes(mode, content_type):
    from google.protobuf import json_format

    original = request(len(VALUES) * 3)
    body = (
        original.SerializeToString()
        if content_type == "application/x-protobuf"
        else json_format.MessageToJson(original).encode()
    )
    lean = decode_logs(body, content_type)
    result = normalise_logs(lean, mode, SALT)

    records = original.resource_logs[0].scope_logs[0].log_records
    assert result.records == len(records)
    assert result.rejected == []
    assert len(result.events) == len(records)
    for record, event in zip(records, result.events, strict=True):
        expected = reference_attributes(record.attributes, mode)
        assert event.attributes == expected
        assert event.name == "claude_code.api_request"
        assert event.request_id == str(expected["request_id"])
        assert event.session_id == expected["session.id"]
    assert result.redacted == (mode != "keep")

    # What is stored (the lean request re-encoded, or the JSON document) is the request,
    # identity redacted, nothing else lost.
    raw, stored_type = encoded(lean)
    assert stored_type == content_type
    stored = decode(raw, stored_type, "logs")
    stored_resource = stored.resource_logs[0].resource.attributes
    assert reference_attributes(stored_resource, "keep") == reference_attributes(
        original.resource_logs[0].resource.attributes, mode
    )
    stored_scope = stored.resource_logs[0].scope_logs[0].scope
    assert stored_scope.name == "com.anthropic.claude_code.events"
    assert reference_attributes(stored_scope.attributes, "keep") == reference_attributes(
        original.resource_logs[0].scope_logs[0].scope.attributes, mode
    )
    stored_records = stored.resource_logs[0].scope_logs[0].log_records
    for before, after in zip(records, stored_records, strict=True):
        assert reference_attributes(after.attributes, "keep") == reference_attributes(
            before.attributes, mode
        )
        assert (after.severity_text, after.trace_id) == ("INFO", bytes(range(16)))
        assert (after.event_name, after.body) == (before.event_name, before.body)
        assert after.time_unix_nano == before.time_unix_nano
    if mode != "keep":
        assert b"@example.com" not in raw and b"org-1" not in raw and b"acc-1" not in raw


def test_broken_attribute_bytes_reject_their_record_only():
    lean = LeanLogsRequest()
    scope = lean.resource_logs.add().scope_logs.add()
    good = KeyValue(key="session.id", value=any_value("s-1")).SerializeToString()
    name = KeyValue(key="event.name", value=any_value("claude_code.user_prompt"))
    for index, extra in enumerate([b"", b"\x0a\x09short", b"\x0a\x01\xff", b""]):
        record = scope.log_records.add(time_unix_nano=T0 + index)
        record.attributes.extend([good, name.SerializeToString()])
        if extra:
            record.attributes.append(extra)
    result = normalise_logs(decode_logs(lean.SerializeToString(), "application/x-protobuf"))
    assert result.records == 4
    assert [path for path, _ in result.rejected] == [
        "resourceLogs[0].scopeLogs[0].logRecords[1]",
        "resourceLogs[0].scopeLogs[0].logRecords[2]",
    ]
    assert all("not an OTLP KeyValue" in reason for _, reason in result.rejected)
    assert len(result.events) == 2


def test_broken_json_records_reject_their_record_only():
    import json

    good = {"key": "session.id", "value": {"stringValue": "s-1"}}
    name = {"key": "event.name", "value": {"stringValue": "claude_code.user_prompt"}}
    records = [
        {"timeUnixNano": str(T0), "attributes": [good, name]},
        "not a record",
        {"timeUnixNano": "soon", "attributes": [good, name]},
        {"timeUnixNano": str(T0 + 1), "attributes": [good, name, {"key": "n", "value": {"intValue": "1.5"}}]},
        {"time_unix_nano": T0 + 2, "attributes": [good, name]},  # snake_case, a number
    ]  # fmt: skip
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}
    result = normalise_logs(decode_logs(json.dumps(document).encode(), "application/json"))
    assert result.records == 5
    rejected = [path.rsplit(".", 1)[1] for path, _ in result.rejected]
    assert rejected == ["logRecords[1]", "logRecords[2]", "logRecords[3]"]
    assert len(result.events) == 2
    assert [e.timestamp.timestamp() for e in result.events] == [T0 / 1e9, (T0 + 2) / 1e9]
