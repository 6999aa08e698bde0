"""OTLP logs and metrics from Claude Code and Codex, into event and metric-point records.
Also the identity redaction applied to every OTLP body (logs, metrics and traces) before
it is stored. No Django.

Requests are decoded into the `opentelemetry-proto` messages: protobuf directly, OTLP/JSON
through protobuf's `json_format` (after turning the hex trace and span ids OTLP/JSON uses
into the base64 the generic proto3 mapping expects). Every record that cannot be used is
rejected with its path in the request (e.g. `resourceLogs[0].scopeLogs[0].logRecords[3]`)
and the reason; the rest of the request is kept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from traces.formats.otlp import OtlpDecodeError

# The personal data Claude Code and Codex attach to every record (user.account_id is
# Codex's and Claude Code's newer name for the account).
IDENTITY_KEYS = (
    "user.email",
    "user.account_uuid",
    "user.account_id",
    "user.id",
    "organization.id",
)
IDENTITY_SET = frozenset(IDENTITY_KEYS)
IDENTITY_KEEP, IDENTITY_HASH, IDENTITY_DROP = "keep", "hash", "drop"

# Bounds beyond which a value is a producer bug, not usage.
MAX_TOKENS = 10**11
MAX_COST_USD = 1_000_000
MAX_DURATION_MS = 7 * 24 * 3600 * 1000

CLAUDE_CODE, CODEX, OTLP = "claude-code", "codex", "otlp"
SESSION_KEYS = ("session.id", "conversation.id")

# Event names that are read into columns; any other name is kept as it came, and counted.
KNOWN_EVENTS = frozenset(
    {
        "claude_code.api_request",
        "claude_code.api_error",
        "claude_code.compaction",
        "claude_code.subagent_completed",
        "claude_code.tool_result",
        "claude_code.user_prompt",
        "codex.conversation_starts",
        "codex.sse_event",
    }
)
# Attributes that must be non-negative integers (counts, sizes, durations) when present.
COUNT_ATTRIBUTES = {
    "claude_code.api_request": ("input_tokens", "output_tokens", "cache_read_tokens",
                                "cache_creation_tokens", "duration_ms", "cost_usd_micros"),
    "claude_code.api_error": ("duration_ms", "attempt", "status_code"),
    "claude_code.compaction": ("duration_ms", "pre_tokens", "post_tokens"),
    "claude_code.subagent_completed": ("total_tokens", "total_tool_uses", "duration_ms"),
    "claude_code.tool_result": ("duration_ms", "tool_input_size_bytes", "tool_result_size_bytes"),
    "claude_code.user_prompt": ("prompt_length",),
    "codex.conversation_starts": ("context_window", "auto_compact_token_limit"),
    "codex.sse_event": ("input_token_count", "output_token_count", "cached_token_count",
                        "reasoning_token_count", "tool_token_count", "duration_ms"),
}  # fmt: skip
TOKEN_LIKE = ("token", "context_window", "auto_compact")

DELTA, CUMULATIVE = 1, 2
TEMPORALITY_NAMES = {DELTA: "delta", CUMULATIVE: "cumulative"}
# Metrics stored as time series, whatever their temporality: every Sum. These two must be
# Sums: a gauge or histogram under their name is rejected.
USAGE_METRICS = {"claude_code.token.usage": "tokens", "claude_code.cost.usage": "USD"}


class Rejected(ValueError):
    """One record cannot be stored; the message is the reason."""


# --- decoding ---------------------------------------------------------------------------


def _hex_ids_to_base64(node, id_keys: frozenset) -> None:
    """OTLP/JSON writes ids in hex; protobuf's JSON mapping wants base64. In place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in id_keys and isinstance(value, str) and value:
                try:
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    pass  # already base64 (the generic mapping), or invalid: ParseDict says
            else:
                _hex_ids_to_base64(value, id_keys)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item, id_keys)


ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})
MESSAGES = {
    "logs": ExportLogsServiceRequest,
    "metrics": ExportMetricsServiceRequest,
    "traces": ExportTraceServiceRequest,
}


def decode(body: bytes, content_type: str, signal: str):
    """An Export{Logs,Metrics,Trace}ServiceRequest from a protobuf or OTLP/JSON body."""
    message_class = MESSAGES[signal]
    request = message_class()
    if content_type.startswith("application/json"):
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise OtlpDecodeError(f"body is not valid JSON: {exc}") from None
        if not isinstance(document, dict):
            raise OtlpDecodeError("body must be a JSON object")
        _hex_ids_to_base64(document, ID_KEYS)
        try:
            json_format.ParseDict(document, request, ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise OtlpDecodeError(f"body is not an OTLP/JSON {signal} request: {exc}") from None
        return request
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"body is not a protobuf {message_class.__name__}: {exc}") from None
    return request


# --- identity redaction ---------------------------------------------------------------------


def may_hold_identity(body: bytes) -> bool:
    """False when no identity key can be in the body (a byte search; JSON with \\u escapes
    counts as possible)."""
    return b"\\u" in body or any(key.encode() in body for key in IDENTITY_KEYS)


def identity_hash(value: str, salt: str) -> str:
    """A keyed hash: the same person gets the same value within a workspace, and the value
    cannot be reversed by hashing a list of addresses without the workspace's key."""
    digest = hmac.new(salt.encode(), value.encode(), hashlib.sha256).hexdigest()
    return f"hmac-sha256:{digest[:32]}"


def _redact_attributes(attributes, mode: str, hashes: dict) -> bool:
    """`hashes` maps a value to its keyed hash (filled on the way; values repeat)."""
    changed = False
    for index in range(len(attributes) - 1, -1, -1):
        if attributes[index].key in IDENTITY_SET:
            _redact_one(attributes, index, mode, hashes)
            changed = True
    return changed


def _redact_one(attributes, index: int, mode: str, hashes: dict) -> None:
    if mode == IDENTITY_DROP:
        del attributes[index]
        return
    item = attributes[index]
    text = str(_any_value(item.value))
    hashed = hashes.get(text)
    if hashed is None:
        hashed = hashes[text] = identity_hash(text, hashes[None])
    item.value.Clear()
    item.value.string_value = hashed


def redact(request, mode: str, salt: str) -> bool:
    """Hash or drop the identity attributes of a decoded request, in place, wherever
    exporters put them: resource, record, data point, span, span event and link
    attributes. Returns whether anything changed."""
    if mode == IDENTITY_KEEP:
        return False
    changed = False
    hashes: dict = {None: salt}

    def visit(attributes):
        nonlocal changed
        changed = _redact_attributes(attributes, mode, hashes) or changed

    if isinstance(request, ExportLogsServiceRequest):
        for resource_logs in request.resource_logs:
            visit(resource_logs.resource.attributes)
            for scope_logs in resource_logs.scope_logs:
                visit(scope_logs.scope.attributes)
                for record in scope_logs.log_records:
                    visit(record.attributes)
    elif isinstance(request, ExportMetricsServiceRequest):
        for resource_metrics in request.resource_metrics:
            visit(resource_metrics.resource.attributes)
            for scope_metrics in resource_metrics.scope_metrics:
                visit(scope_metrics.scope.attributes)
                for metric in scope_metrics.metrics:
                    kind = metric.WhichOneof("data")
                    if kind is None:
                        continue
                    for point in getattr(metric, kind).data_points:
                        visit(point.attributes)
    else:
        for resource_spans in request.resource_spans:
            visit(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                visit(scope_spans.scope.attributes)
                for span in scope_spans.spans:
                    visit(span.attributes)
                    for event in span.events:
                        visit(event.attributes)
                    for link in span.links:
                        visit(link.attributes)
    return changed


def redacted_body(body: bytes, content_type: str, signal: str, mode: str, salt: str):
    """(body, content_type, request or None) as it may be stored under the identity policy.

    The received bytes are kept exactly when the policy is `keep` or no identity attribute
    is present; otherwise the decoded request is redacted and re-encoded as protobuf, and
    only that is stored: the raw identity never reaches the disk.
    """
    if mode == IDENTITY_KEEP or not may_hold_identity(body):
        return body, content_type, None
    request = decode(body, content_type, signal)
    if not redact(request, mode, salt):
        return body, content_type, request
    return request.SerializeToString(), "application/x-protobuf", request


# --- values ---------------------------------------------------------------------------------


def _any_value(value):
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else str(number)  # JSON has no NaN
    if kind == "bool_value":
        return value.bool_value
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return None


def attributes_dict(attributes) -> dict:
    return {kv.key: _any_value(kv.value) for kv in attributes}


REDACTED = object()  # marks, in the `hashes` of a request, that a record was redacted


def _record_attributes(attributes, mode: str, hashes: dict) -> dict:
    """`attributes_dict` of a log record with its identity attributes redacted, in the
    message too (in place), in one pass over the attributes."""
    attrs = {kv.key: _any_value(kv.value) for kv in attributes}
    if mode == IDENTITY_KEEP or IDENTITY_SET.isdisjoint(attrs):
        return attrs
    if len(attrs) == len(attributes):
        # No repeated key: the dict keeps the message's order, so the identity attributes'
        # positions come from it, without reading every attribute of the message again.
        for index in reversed([i for i, key in enumerate(attrs) if key in IDENTITY_SET]):
            _redact_one(attributes, index, mode, hashes)
    else:
        _redact_attributes(attributes, mode, hashes)
    hashes[REDACTED] = True
    for key in IDENTITY_SET.intersection(attrs):
        if mode == IDENTITY_DROP:
            del attrs[key]
        else:
            attrs[key] = hashes[str(attrs[key])]
    return attrs


def _limit(key: str) -> int | None:
    if key.endswith("duration_ms"):
        return MAX_DURATION_MS
    return MAX_TOKENS if any(part in key for part in TOKEN_LIKE) else None


def _int(attrs: dict, key: str) -> int | None:
    """A non-negative, plausible integer attribute, or None when absent."""
    value = attrs.get(key)
    if value is None or value == "":
        return None
    if type(value) is not int:
        value = _as_int(key, value)
    if value < 0:
        raise Rejected(f"attribute {key!r} is negative ({value})")
    limit = LIMITS[key] if key in LIMITS else _limit(key)
    if limit is not None and value > limit:
        raise Rejected(f"attribute {key!r} = {value:,} is not plausible (over {limit:,})")
    return value


def _as_int(key: str, value) -> int:
    if isinstance(value, str):
        try:
            value = float(value) if "." in value or "e" in value.lower() else int(value)
        except ValueError:
            raise Rejected(f"attribute {key!r} must be a number, got {value!r}") from None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise Rejected(f"attribute {key!r} must be a whole number, got {value!r}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Rejected(f"attribute {key!r} must be a number, got {value!r}")
    return value


LIMITS = {key: _limit(key) for keys in COUNT_ATTRIBUTES.values() for key in keys}


def _cost(attrs: dict) -> Decimal | None:
    """cost_usd (a double), else cost_usd_micros (integer 10⁻⁶ USD)."""
    raw = attrs.get("cost_usd")
    if raw is None or raw == "":
        micros = _int(attrs, "cost_usd_micros")
        return None if micros is None else Decimal(micros) / 1_000_000
    if isinstance(raw, bool):
        raise Rejected(f"attribute 'cost_usd' must be a number, got {raw!r}")
    try:
        value = Decimal(str(raw))
    except InvalidOperation:
        raise Rejected(f"attribute 'cost_usd' must be a number, got {raw!r}") from None
    if not value.is_finite():
        raise Rejected(f"attribute 'cost_usd' must be finite, got {raw!r}")
    if value < 0:
        raise Rejected(f"attribute 'cost_usd' is negative ({raw})")
    if value > MAX_COST_USD:
        raise Rejected(f"attribute 'cost_usd' = {raw} is not plausible (over ${MAX_COST_USD:,})")
    return value.quantize(Decimal("0.00000001"))


def _text(attrs: dict, key: str, limit: int = 200) -> str:
    value = attrs.get(key)
    if value is None:
        return ""
    return str(value)[:limit]


def _time(nanos: int) -> datetime:
    try:
        return datetime.fromtimestamp(nanos / 1e9, tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise Rejected(f"time {nanos} is not a representable time") from None


def _iso_time(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def harness_of(name: str, resource: dict) -> str:
    if name.startswith("claude_code."):
        return CLAUDE_CODE
    if name.startswith("codex."):
        return CODEX
    service = str(resource.get("service.name") or "")
    if service.startswith("claude-code"):
        return CLAUDE_CODE
    if service.startswith("codex"):
        return CODEX
    return OTLP


def _session_id(attrs: dict, resource: dict) -> str:
    for source in (attrs, resource):
        for key in SESSION_KEYS:
            value = source.get(key)
            if value not in (None, ""):
                return str(value)[:200]
    return ""


def _digest(*parts) -> str:
    return hashlib.blake2b(
        orjson.dumps(parts, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS),
        digest_size=16,
    ).hexdigest()


_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def _event_key(name: str, nanos: int, attributes_json: bytes) -> str:
    """`_digest(name, nanos, attrs)` from the attributes' sorted JSON, without a second dump."""
    head = orjson.dumps([name, nanos])[:-1]
    return hashlib.blake2b(head + b"," + attributes_json + b"]", digest_size=16).hexdigest()


# --- logs -----------------------------------------------------------------------------------


@dataclass(slots=True)
class EventRecord:
    """One telemetry event. Token fields follow the Call split: `input_tokens` is the
    uncached input (Codex's input_token_count minus its cached_token_count)."""

    path: str
    name: str
    recognised: bool
    harness: str
    session_id: str
    key: str
    timestamp: datetime
    attributes: dict
    prompt_id: str = ""
    request_id: str = ""
    app_version: str = ""
    model: str = ""
    query_source: str = ""
    agent_name: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: Decimal | None = None
    duration_ms: int | None = None
    context_window: int | None = None
    auto_compact_token_limit: int | None = None
    attributes_json: bytes = b""  # `attributes` as sorted JSON (stored as it is)


@dataclass
class LogsResult:
    events: list[EventRecord] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (record path, reason)
    records: int = 0
    unknown: int = 0  # stored with recognised=False
    skipped: int = 0  # Codex stream events other than response.completed, not stored
    redacted: bool = False  # identity attributes were hashed or dropped in the request


def event_name(record, attrs: dict, resource: dict) -> str:
    """LogRecord.event_name, else a dotted string body, else `event.name` (Claude Code
    sends it bare, e.g. `api_request`, so the harness's prefix is added)."""
    if record.event_name:
        return record.event_name[:100]
    if record.body.WhichOneof("value") == "string_value":
        body = record.body.string_value
        if "." in body and " " not in body and len(body) <= 100:
            return body
    name = str(attrs.get("event.name") or "")[:100]
    if name and "." not in name:
        prefix = {CLAUDE_CODE: "claude_code.", CODEX: "codex."}.get(harness_of("", resource), "")
        name = prefix + name
    return name


def _event(
    record, path: str, resource: dict, mode: str = IDENTITY_KEEP, hashes: dict | None = None
) -> EventRecord | None:
    attrs = _record_attributes(record.attributes, mode, hashes)
    name = event_name(record, attrs, resource)
    if not name:
        raise Rejected("no event name (LogRecord.eventName, a dotted body or event.name)")
    harness = harness_of(name, resource)
    session_id = _session_id(attrs, resource)
    if not session_id:
        raise Rejected(
            f"{name}: no session (a session.id or conversation.id attribute on the record "
            "or its resource)"
        )
    nanos = record.time_unix_nano or record.observed_time_unix_nano
    if nanos:
        timestamp = _time(nanos)
    else:
        timestamp = _iso_time(str(attrs.get("event.timestamp") or ""))
        if timestamp is None:
            raise Rejected(
                f"{name}: no time (timeUnixNano, observedTimeUnixNano or event.timestamp)"
            )
    if (
        name == "codex.sse_event"
        and attrs.get("event.kind") != "response.completed"
        and not attrs.get("error.message")
    ):
        return None  # one per streamed chunk: counted, kept in the raw body only
    counts = {key: _int(attrs, key) for key in COUNT_ATTRIBUTES.get(name, ())}
    count = counts.get
    attributes_json = orjson.dumps(attrs, option=_SORTED)
    event = EventRecord(
        path=path,
        name=name,
        recognised=name in KNOWN_EVENTS,
        harness=harness,
        session_id=session_id,
        key=_event_key(name, nanos, attributes_json),
        timestamp=timestamp,
        attributes=attrs,
        attributes_json=attributes_json,
        prompt_id=_text(attrs, "prompt.id", 64),
        request_id=_text(attrs, "request_id") or _text(attrs, "auth.request_id"),
        app_version=_text(attrs, "app.version", 64) or _text(resource, "service.version", 64),
        model=_text(attrs, "model"),
        query_source=_text(attrs, "query_source", 100),
        agent_name=_text(attrs, "agent.name") or _text(attrs, "agent_type"),
        duration_ms=count("duration_ms") if "duration_ms" in counts else _int(attrs, "duration_ms"),
    )
    if name == "claude_code.api_request":
        event.input_tokens = count("input_tokens")
        event.output_tokens = count("output_tokens")
        event.cache_read_tokens = count("cache_read_tokens")
        event.cache_creation_tokens = count("cache_creation_tokens")
        event.cost_usd = _cost(attrs)
    elif name == "codex.sse_event" and attrs.get("event.kind") == "response.completed":
        total = count("input_token_count")
        cached = count("cached_token_count") or 0
        if total is not None and cached > total:
            raise Rejected(
                f"codex.sse_event: cached_token_count ({cached:,}) exceeds input_token_count "
                f"({total:,}), which includes the cached tokens"
            )
        event.input_tokens = None if total is None else total - cached
        event.cache_read_tokens = cached
        event.cache_creation_tokens = 0
        event.output_tokens = count("output_token_count")
        event.reasoning_tokens = count("reasoning_token_count")
    elif name == "codex.conversation_starts":
        event.context_window = count("context_window")
        event.auto_compact_token_limit = count("auto_compact_token_limit")
    elif name == "claude_code.subagent_completed":
        event.agent_name = _text(attrs, "agent_type")
    return event


def normalise_logs(
    request: ExportLogsServiceRequest, mode: str = IDENTITY_KEEP, salt: str = ""
) -> LogsResult:
    """The request's events. With `mode` hash or drop, the identity attributes are first
    redacted in the request itself (as `redact` does; `result.redacted` says whether any
    were), in the same pass that reads them."""
    result = LogsResult()
    hashes: dict = {None: salt}
    for r, resource_logs in enumerate(request.resource_logs):
        if mode != IDENTITY_KEEP:
            for attributes in (
                resource_logs.resource.attributes,
                *(scope.scope.attributes for scope in resource_logs.scope_logs),
            ):
                result.redacted = _redact_attributes(attributes, mode, hashes) or result.redacted
        resource = attributes_dict(resource_logs.resource.attributes)
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            for i, record in enumerate(scope_logs.log_records):
                result.records += 1
                path = f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{i}]"
                try:
                    event = _event(record, path, resource, mode, hashes)
                except Rejected as exc:
                    result.rejected.append((path, str(exc)))
                    continue
                if event is None:
                    result.skipped += 1
                    continue
                if not event.recognised:
                    result.unknown += 1
                result.events.append(event)
    result.redacted = result.redacted or REDACTED in hashes
    return result


# --- metrics --------------------------------------------------------------------------------


@dataclass(slots=True)
class MetricPoint:
    path: str
    name: str
    harness: str
    session_id: str
    series_key: str
    temporality: int
    start_ns: int
    time_ns: int
    timestamp: datetime
    value: float  # as sent: a delta, or the running total for cumulative points
    attributes: dict
    type: str = ""
    model: str = ""
    query_source: str = ""
    monotonic: bool = True


@dataclass
class MetricsResult:
    points: list[MetricPoint] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    data_points: int = 0
    ignored_points: int = 0  # gauges, histograms and summaries of other metrics


def _point_value(point, name: str, signed: bool) -> float:
    """The point's number; `signed` (an up-down counter) allows negative values."""
    kind = point.WhichOneof("value")
    if kind is None:
        raise Rejected(f"{name}: data point has no value (asInt or asDouble)")
    value = point.as_int if kind == "as_int" else point.as_double
    if not math.isfinite(value):
        raise Rejected(f"{name}: value {value} is not finite")
    if value < 0 and not signed:
        raise Rejected(f"{name}: value {value} is negative")
    limit = MAX_COST_USD if name == "claude_code.cost.usage" else MAX_TOKENS
    if abs(value) > limit:
        raise Rejected(f"{name}: value {value:,} is not plausible (over {limit:,})")
    return float(value)


def _metric_points(metric, base_path: str, resource: dict, scope: str, result: MetricsResult):
    kind = metric.WhichOneof("data")
    points = getattr(metric, kind).data_points if kind else []
    name = metric.name[:200]
    if kind != "sum":
        for p in range(len(points)):
            result.data_points += 1
            if name in USAGE_METRICS:
                result.rejected.append(
                    (
                        f"{base_path}.dataPoints[{p}]",
                        f"{name} must be a Sum (a counter), got {kind}",
                    )
                )
            else:
                result.ignored_points += 1
        return
    temporality = metric.sum.aggregation_temporality
    for p, point in enumerate(points):
        result.data_points += 1
        path = f"{base_path}.dataPoints[{p}]"
        try:
            if temporality not in TEMPORALITY_NAMES:
                raise Rejected(
                    f"{name}: aggregationTemporality {temporality} is not delta (1) or "
                    "cumulative (2)" + (": it is unspecified" if temporality == 0 else "")
                )
            monotonic = metric.sum.is_monotonic or name in USAGE_METRICS
            value = _point_value(point, name, signed=not monotonic)
            if not point.time_unix_nano:
                raise Rejected(f"{name}: data point has no timeUnixNano")
            attrs = attributes_dict(point.attributes)
            result.points.append(
                MetricPoint(
                    path=path,
                    name=name,
                    harness=harness_of(name, resource),
                    session_id=_session_id(attrs, resource),
                    series_key=_digest(name, scope, resource, attrs),
                    temporality=temporality,
                    start_ns=point.start_time_unix_nano,
                    time_ns=point.time_unix_nano,
                    timestamp=_time(point.time_unix_nano),
                    value=value,
                    attributes=attrs,
                    type=_text(attrs, "type", 32),
                    model=_text(attrs, "model"),
                    query_source=_text(attrs, "query_source", 100),
                    monotonic=monotonic,
                )
            )
        except Rejected as exc:
            result.rejected.append((path, str(exc)))


def normalise_metrics(request: ExportMetricsServiceRequest) -> MetricsResult:
    result = MetricsResult()
    for r, resource_metrics in enumerate(request.resource_metrics):
        resource = attributes_dict(resource_metrics.resource.attributes)
        for s, scope_metrics in enumerate(resource_metrics.scope_metrics):
            for m, metric in enumerate(scope_metrics.metrics):
                _metric_points(
                    metric,
                    f"resourceMetrics[{r}].scopeMetrics[{s}].metrics[{m}]",
                    resource,
                    scope_metrics.scope.name,
                    result,
                )
    return result
