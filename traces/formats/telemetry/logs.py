"""OTLP logs (Claude Code and Codex events) into event records. No Django."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

import orjson
from google.protobuf.message import DecodeError

from traces.formats.otlp import OtlpDecodeError
from traces.formats.telemetry.common import (
    _SORTED,
    CLAUDE_CODE,
    CODEX,
    COUNT_ATTRIBUTES,
    IDENTITY_DROP,
    IDENTITY_KEEP,
    IDENTITY_SET,
    KNOWN_EVENTS,
    Rejected,
    _cost,
    _event_key,
    _int,
    _iso_time,
    _session_id,
    _text,
    _time,
    harness_of,
)
from traces.formats.telemetry.identity import identity_hash
from traces.formats.telemetry.json_logs import (
    BadJson,
    JsonLogs,
    JsonReader,
    JsonRecord,
    _field,
    _list,
    json_pair,
)
from traces.formats.telemetry.wire import (
    BadAttribute,
    LeanLogsRequest,
    body_string,
    key_value,
    lean_logs,
    string_key_value,
)


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


def event_name(record_name: str, body: str | None, attrs: dict, resource: dict) -> str:
    """LogRecord.event_name, else a dotted string body, else `event.name` (Claude Code
    sends it bare, e.g. `api_request`, so the harness's prefix is added)."""
    if record_name:
        return record_name[:100]
    if body is not None and "." in body and " " not in body and len(body) <= 100:
        return body
    name = str(attrs.get("event.name") or "")[:100]
    if name and "." not in name:
        prefix = {CLAUDE_CODE: "claude_code.", CODEX: "codex."}.get(harness_of("", resource), "")
        name = prefix + name
    return name


class _Reader:
    """Reads the attributes of one request's records (see `wire`), redacting the identity
    attributes in the request itself as it goes when the mode is hash or drop."""

    def __init__(self, mode: str, salt: str):
        self.mode = mode
        self.salt = salt
        self.pairs: dict[bytes, tuple[str, object]] = {}  # attribute bytes -> (key, value)
        self.hashes: dict[str, str] = {}  # value -> its keyed hash
        self.replacements: dict[bytes, bytes] = {}  # attribute bytes -> hashed attribute
        self.redacted = False

    def attributes(self, blobs) -> dict:
        pairs = self.pairs
        attrs = {}
        for blob in blobs:
            pair = pairs.get(blob)
            if pair is None:
                pair = pairs[blob] = key_value(blob)
            attrs[pair[0]] = pair[1]
        if self.mode == IDENTITY_KEEP or IDENTITY_SET.isdisjoint(attrs):
            return attrs
        if len(attrs) == len(blobs):
            # No repeated key: the dict keeps the message's order, so the identity
            # attributes' positions come from it without reading the attributes again.
            self._redact_at(blobs, [i for i, key in enumerate(attrs) if key in IDENTITY_SET])
        else:
            self.redact(blobs)
        for key in IDENTITY_SET.intersection(attrs):
            if self.mode == IDENTITY_DROP:
                del attrs[key]
            else:
                attrs[key] = self.hashed(attrs[key])
        return attrs

    def hashed(self, value) -> str:
        text = str(value)
        hashed = self.hashes.get(text)
        if hashed is None:
            hashed = self.hashes[text] = identity_hash(text, self.salt)
        return hashed

    def redact(self, blobs) -> None:
        """Hash or drop the identity attributes among encoded attributes, in place."""
        pairs = self.pairs
        self._redact_at(
            blobs,
            [
                index
                for index, blob in enumerate(blobs)
                if (pairs.get(blob) or key_value(blob))[0] in IDENTITY_SET
            ],
        )

    def _redact_at(self, blobs, indexes: list[int]) -> None:
        if not indexes:
            return
        self.redacted = True
        for index in reversed(indexes):
            if self.mode == IDENTITY_DROP:
                del blobs[index]
                continue
            blob = blobs[index]
            replacement = self.replacements.get(blob)
            if replacement is None:
                key, value = self.pairs.get(blob) or key_value(blob)
                replacement = self.replacements[blob] = string_key_value(key, self.hashed(value))
            blobs[index] = replacement


def _event(record, path: str, resource: dict, reader: _Reader) -> EventRecord | None:
    try:
        attrs = reader.attributes(record.attributes)
    except BadAttribute as exc:
        raise Rejected(f"an attribute is {exc}") from None
    body = record.body if isinstance(reader, JsonReader) else body_string(record.body)
    name = event_name(record.event_name, body, attrs, resource)
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


def decode_logs(body: bytes, content_type: str):
    """A logs request body as `normalise_logs` reads it: the lean request (see `wire`) for
    protobuf, the parsed document for OTLP/JSON (see `json_logs`)."""
    if content_type.startswith("application/json"):
        try:
            return JsonLogs(orjson.loads(body))
        except orjson.JSONDecodeError as exc:
            raise OtlpDecodeError(f"body is not valid JSON: {exc}") from None
    try:
        return lean_logs(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"body is not a protobuf ExportLogsServiceRequest: {exc}") from None


def encoded(request) -> tuple[bytes, str]:
    """(bytes, content type) of a (redacted) request from `decode_logs`, to be stored."""
    if isinstance(request, JsonLogs):
        return orjson.dumps(request.document), "application/json"
    return request.SerializeToString(), "application/x-protobuf"


def _lean_resources(request, reader: _Reader):
    """(index, resource attributes, [(scope index, records)]) of a lean request."""
    for r, resource_logs in enumerate(request.resource_logs):
        try:
            if reader.mode != IDENTITY_KEEP:
                reader.redact(resource_logs.resource.attributes)
                for scope_logs in resource_logs.scope_logs:
                    reader.redact(scope_logs.scope.attributes)
            resource = dict(key_value(blob) for blob in resource_logs.resource.attributes)
        except BadAttribute as exc:
            raise OtlpDecodeError(f"resourceLogs[{r}].resource: an attribute is {exc}") from None
        yield (
            r,
            resource,
            [(s, scope.log_records) for s, scope in enumerate(resource_logs.scope_logs)],
        )


def _json_records(nodes) -> list:
    records = []
    for node in nodes:
        try:
            records.append(JsonRecord(node))
        except BadJson as exc:
            records.append(Rejected(str(exc)))
    return records


def _json_resources(request: JsonLogs, reader: JsonReader):
    """As `_lean_resources`, for an OTLP/JSON document (redacted in place)."""
    for r, node in enumerate(request.resource_logs):
        try:
            if not isinstance(node, dict):
                raise BadJson("must be an object")
            resource_attrs = _list((node.get("resource") or {}).get("attributes"))
            scopes = _list(_field(node, "scopeLogs", "scope_logs"))
            if reader.mode != IDENTITY_KEEP:
                reader.redact(resource_attrs)
                for scope in scopes:
                    reader.redact(_list((scope.get("scope") or {}).get("attributes")))
            resource = dict(json_pair(item) for item in resource_attrs)
            yield (
                r,
                resource,
                [
                    (s, _json_records(_list(_field(scope, "logRecords", "log_records"))))
                    for s, scope in enumerate(scopes)
                ],
            )
        except (BadJson, AttributeError) as exc:
            raise OtlpDecodeError(f"resourceLogs[{r}] is not OTLP/JSON: {exc}") from None


def normalise_logs(request, mode: str = IDENTITY_KEEP, salt: str = "") -> LogsResult:
    """The request's events (from `decode_logs`; an ExportLogsServiceRequest is read
    through a lean copy). With `mode` hash or drop, the identity attributes are first
    redacted in the request itself (as `redact` does; `result.redacted` says whether any
    were), in the same pass that reads them."""
    reader = _Reader(mode, salt)
    if isinstance(request, JsonLogs):
        reader = JsonReader(mode, reader.hashed)
        resources = _json_resources(request, reader)
    else:
        if not isinstance(request, LeanLogsRequest):
            request = lean_logs(request)
        resources = _lean_resources(request, reader)
    result = LogsResult()
    for r, resource, scopes in resources:
        for s, records in scopes:
            for i, record in enumerate(records):
                result.records += 1
                path = f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{i}]"
                try:
                    if isinstance(record, Rejected):
                        raise record
                    event = _event(record, path, resource, reader)
                except Rejected as exc:
                    result.rejected.append((path, str(exc)))
                    continue
                if event is None:
                    result.skipped += 1
                    continue
                if not event.recognised:
                    result.unknown += 1
                result.events.append(event)
    result.redacted = reader.redacted
    return result
