"""OTLP trace requests (protobuf or OTLP/JSON) into call records. No Django.

Three attribute dialects are understood, in this order of precedence (docs/traces.md has
the table of every accepted name):

* Claude Code's own spans (`claude_code.llm_request`): unprefixed `input_tokens`,
  `cache_read_tokens`, `cache_creation_tokens` with Anthropic's meaning (cache excluded);
* the OpenTelemetry GenAI conventions: `gen_ai.usage.input_tokens` *includes* the cache
  counts (`gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_write.input_tokens`,
  the older `…cache_creation.input_tokens` and Sentry's aliases). If the cache counts
  exceed the input count, the producer used Anthropic's meaning and the counts are added
  instead;
* OpenInference: `llm.token_count.prompt` with `prompt_details.cache_read/cache_write`
  as subsets.

`gen_ai.conversation.id` (else `session.id`, else the trace id) names the session. Spans
without token counts (tools, interactions) are accepted and not turned into calls. A span
with `gen_ai.conversation.compacted` true also marks a compaction of its session.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

from traces.formats.records import (
    MAX_TOKEN_COUNT,
    AgentInfo,
    CallRecord,
    CompactionRecord,
    SessionInfo,
)

HARNESS = "otlp"


def span_harness(span: Span) -> str:
    """Claude Code's and Codex's own spans belong to the harness's session (the one its
    transcript and its events name), other producers' to an `otlp` session."""
    service = str(span.resource.get("service.name") or "")
    if span.name.startswith("claude_code.") or service.startswith("claude-code"):
        return "claude-code"
    if span.name.startswith("codex.") or service.startswith("codex"):
        return "codex"
    return HARNESS


INPUT_KEYS_GENAI = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
OUTPUT_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "output_tokens",
    "llm.token_count.completion",
)
CACHE_READ_KEYS = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.input_tokens.cached",
    "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.usage.cached_tokens",
    "gen_ai.usage.input_cached_tokens",
)
CACHE_WRITE_KEYS = (
    "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.input_tokens.cache_write",
    "gen_ai.usage.cache_creation_input_tokens",
    "gen_ai.usage.cache_write_tokens",
)
REASONING_KEYS = (
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.output_tokens.reasoning",
    "codex.usage.reasoning_output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
)
PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
COMPACTED_KEY = "gen_ai.conversation.compacted"
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "model", "llm.model_name")
SESSION_KEYS = ("gen_ai.conversation.id", "session.id", "session_id")
AGENT_KEYS = ("gen_ai.agent.id", "agent_id", "agent.id")
KEY_KEYS = ("gen_ai.response.id", "request_id", "llm.response.id")


class OtlpDecodeError(ValueError):
    """The request body is not a valid ExportTraceServiceRequest."""


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict
    resource: dict
    scope: str
    scope_version: str


@dataclass
class OtlpResult:
    sessions: dict[tuple[str, str], SessionInfo] = field(default_factory=dict)
    agents: dict[tuple[str, str, str], AgentInfo] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    compactions: list[CompactionRecord] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (span id, reason)
    spans: int = 0
    ignored_spans: int = 0

    def records(self) -> Iterator:
        yield from self.sessions.values()
        yield from self.agents.values()
        yield from self.calls
        yield from self.compactions


# --- decoding ---------------------------------------------------------------------


def decode_id(value, expected_bytes: int) -> str:
    """Hex (the OTLP/JSON rule) or base64 (the generic proto3 JSON mapping) -> lowercase hex."""
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, str):
        if len(value) == expected_bytes * 2:
            try:
                raw = bytes.fromhex(value)
            except ValueError:
                raw = b""
        else:
            try:
                raw = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raw = b""
    else:
        raw = b""
    if len(raw) != expected_bytes:
        raise ValueError(f"id {value!r} is not {expected_bytes} bytes in hex or base64")
    return raw.hex()


def _json_value(value):
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if "arrayValue" in value:
        return [_json_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return {
            kv.get("key"): _json_value(kv.get("value"))
            for kv in (value["kvlistValue"] or {}).get("values", [])
        }
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _json_attributes(items) -> dict:
    if not isinstance(items, list):
        return {}
    return {
        item.get("key"): _json_value(item.get("value")) for item in items if isinstance(item, dict)
    }


def _nanos(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def spans_from_json(body: bytes) -> Iterator[Span | tuple[str, str]]:
    """Spans of an OTLP/JSON request; (span id, reason) for spans whose ids are invalid."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"body is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise OtlpDecodeError("body must be a JSON object with 'resourceSpans'")
    for resource_spans in document.get("resourceSpans") or []:
        resource = _json_attributes((resource_spans.get("resource") or {}).get("attributes"))
        scopes = (
            resource_spans.get("scopeSpans")
            or resource_spans.get("instrumentationLibrarySpans")
            or []
        )
        for scope_spans in scopes:
            scope = scope_spans.get("scope") or scope_spans.get("instrumentationLibrary") or {}
            for span in scope_spans.get("spans") or []:
                raw_id = span.get("spanId", "")
                try:
                    yield Span(
                        trace_id=decode_id(span.get("traceId"), 16),
                        span_id=decode_id(raw_id, 8),
                        parent_span_id=decode_id(span["parentSpanId"], 8)
                        if span.get("parentSpanId")
                        else "",
                        name=str(span.get("name") or ""),
                        start_ns=_nanos(span.get("startTimeUnixNano")),
                        end_ns=_nanos(span.get("endTimeUnixNano")),
                        attributes=_json_attributes(span.get("attributes")),
                        resource=resource,
                        scope=str(scope.get("name") or ""),
                        scope_version=str(scope.get("version") or ""),
                    )
                except ValueError as exc:
                    yield (str(raw_id), str(exc))


def _proto_value(value):
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def spans_from_protobuf(body: bytes) -> Iterator[Span | tuple[str, str]]:
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"body is not a protobuf ExportTraceServiceRequest: {exc}") from None
    for resource_spans in request.resource_spans:
        resource = {kv.key: _proto_value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                try:
                    yield Span(
                        trace_id=decode_id(span.trace_id, 16),
                        span_id=decode_id(span.span_id, 8),
                        parent_span_id=span.parent_span_id.hex() if span.parent_span_id else "",
                        name=span.name,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes={kv.key: _proto_value(kv.value) for kv in span.attributes},
                        resource=resource,
                        scope=scope_spans.scope.name,
                        scope_version=scope_spans.scope.version,
                    )
                except ValueError as exc:
                    yield (span.span_id.hex() or "?", str(exc))


# --- normalisation --------------------------------------------------------------


class _Bad(ValueError):
    pass


def _first(attributes: dict, keys) -> object | None:
    for key in keys:
        if key in attributes and attributes[key] is not None:
            return attributes[key]
    return None


def _count(attributes: dict, keys, field_name: str) -> int | None:
    for key in keys:
        if key in attributes and attributes[key] is not None:
            value = attributes[key]
            if isinstance(value, str) and value.strip().isdigit():
                value = int(value)
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _Bad(f"attribute {key!r} must be a non-negative integer, got {value!r}")
            if value > MAX_TOKEN_COUNT:
                raise _Bad(
                    f"attribute {key!r} = {value} is not a plausible count "
                    f"(over {MAX_TOKEN_COUNT:,})"
                )
            return value
    return None


def _usage(span: Span) -> dict | None:
    """Token counts in Anthropic's split (uncached input, cache write, cache read) + context."""
    attrs = span.attributes
    output = _count(attrs, OUTPUT_KEYS, "output") or 0
    reasoning = _count(attrs, REASONING_KEYS, "reasoning") or 0
    if "input_tokens" in attrs and (
        span.name.startswith("claude_code") or "claude_code" in span.scope
    ):
        uncached = _count(attrs, ("input_tokens",), "input") or 0
        cache_read = _count(attrs, ("cache_read_tokens",), "cache read") or 0
        cache_write = _count(attrs, ("cache_creation_tokens",), "cache creation") or 0
        return _split(uncached, cache_write, cache_read, output, reasoning)
    total = _count(attrs, INPUT_KEYS_GENAI, "input")
    cache_read = _count(attrs, CACHE_READ_KEYS, "cache read")
    cache_write = _count(attrs, CACHE_WRITE_KEYS, "cache creation")
    if total is None:
        total = _count(attrs, ("llm.token_count.prompt",), "prompt")
        cache_read = _count(attrs, ("llm.token_count.prompt_details.cache_read",), "cache read")
        cache_write = _count(attrs, ("llm.token_count.prompt_details.cache_write",), "cache write")
    if total is None:
        if "input_tokens" in attrs:  # unprefixed, Anthropic meaning, from another producer
            return _split(
                _count(attrs, ("input_tokens",), "input") or 0,
                _count(attrs, ("cache_creation_tokens",), "cache creation") or 0,
                _count(attrs, ("cache_read_tokens",), "cache read") or 0,
                output,
                reasoning,
            )
        if _first(attrs, OUTPUT_KEYS) is None:
            return None
        total = 0
    cache_read, cache_write = cache_read or 0, cache_write or 0
    if cache_read + cache_write > total:
        return _split(total, cache_write, cache_read, output, reasoning)
    return _split(total - cache_read - cache_write, cache_write, cache_read, output, reasoning)


def _split(uncached, cache_write, cache_read, output, reasoning) -> dict:
    return {
        "input_tokens": uncached,
        "cache_creation_tokens": cache_write,
        "cache_read_tokens": cache_read,
        "output_tokens": output,
        "reasoning_tokens": reasoning,
        "context_tokens": uncached + cache_write + cache_read,
    }


def normalise(spans: Iterator[Span | tuple[str, str]]) -> OtlpResult:
    result = OtlpResult()
    for span in spans:
        result.spans += 1
        if isinstance(span, tuple):
            result.rejected.append(span)
            continue
        try:
            usage = _usage(span)
        except _Bad as exc:
            result.rejected.append((span.span_id, str(exc)))
            continue
        compacted = span.attributes.get(COMPACTED_KEY) in (True, 1, "true", "True")
        if usage is None and not compacted:
            result.ignored_spans += 1
            continue
        if span.start_ns <= 0:
            result.rejected.append((span.span_id, "startTimeUnixNano is missing"))
            continue
        try:
            started = datetime.fromtimestamp(span.start_ns / 1e9, tz=UTC)
        except (ValueError, OverflowError, OSError):
            result.rejected.append(
                (span.span_id, f"startTimeUnixNano {span.start_ns} is not a representable time")
            )
            continue
        attrs = span.attributes
        harness = span_harness(span)
        session_id = str(
            _first(attrs, SESSION_KEYS) or _first(span.resource, SESSION_KEYS) or span.trace_id
        )
        agent_id = str(_first(attrs, AGENT_KEYS) or "main")
        parent_agent = attrs.get("parent_agent_id") or attrs.get("gen_ai.agent.parent_id")
        if (harness, session_id) not in result.sessions:
            result.sessions[(harness, session_id)] = SessionInfo(
                harness=harness,
                external_id=session_id,
                project=str(span.resource.get("service.name") or ""),
                harness_version=span.scope_version,
            )
        if agent_id != "main" and (harness, session_id, agent_id) not in result.agents:
            result.agents[(harness, session_id, agent_id)] = AgentInfo(
                harness=harness,
                session_id=session_id,
                agent_id=agent_id,
                parent_agent_id=str(parent_agent) if parent_agent else "main",
                agent_type=str(attrs.get("gen_ai.agent.name") or ""),
            )
        if compacted:
            result.compactions.append(
                CompactionRecord(
                    harness=harness,
                    session_id=session_id,
                    agent_id=agent_id,
                    key=f"span:{span.trace_id}:{span.span_id}",
                    timestamp=started,
                    trigger="unknown",
                    line=0,
                )
            )
            if usage is None:
                continue
        blocks = []
        for key in (
            "gen_ai.completion",
            "llm.output_messages.0.message.content",
            "gen_ai.output.messages",
        ):
            if isinstance(attrs.get(key), str):
                blocks.append({"type": "text", "text": attrs[key]})
        result.calls.append(
            CallRecord(
                harness=harness,
                session_id=session_id,
                agent_id=agent_id,
                key=str(_first(attrs, KEY_KEYS) or f"span:{span.trace_id}:{span.span_id}"),
                timestamp=started,
                model=str(_first(attrs, MODEL_KEYS) or ""),
                line=0,
                is_sidechain=agent_id != "main",
                text={
                    "blocks": blocks,
                    "span": {
                        "name": span.name,
                        "trace_id": span.trace_id,
                        "span_id": span.span_id,
                        "provider": str(
                            _first(attrs, PROVIDER_KEYS)
                            or _first(span.resource, PROVIDER_KEYS)
                            or ""
                        ),
                    },
                },
                **usage,
            )
        )
    return result


def parse_request(body: bytes, content_type: str) -> OtlpResult:
    """Decode and normalise one OTLP/HTTP request body (already decompressed)."""
    if content_type.startswith("application/x-protobuf") or content_type.startswith(
        "application/protobuf"
    ):
        return normalise(spans_from_protobuf(body))
    if content_type.startswith("application/json"):
        return normalise(spans_from_json(body))
    raise OtlpDecodeError(
        f"unsupported content type {content_type!r}: use application/x-protobuf or application/json"
    )
