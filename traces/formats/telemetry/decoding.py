"""OTLP request bodies into `opentelemetry-proto` messages: protobuf directly, OTLP/JSON
through protobuf's `json_format` (after turning the hex trace and span ids OTLP/JSON uses
into the base64 the generic proto3 mapping expects). No Django."""

from __future__ import annotations

import base64

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from traces.formats.otlp import OtlpDecodeError


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
