"""The OTLP/HTTP receivers: POST /v1/traces, /v1/logs and /v1/metrics, protobuf or JSON,
optional gzip or deflate, the same token auth and size limits for all three.

Answers follow the OTLP specification: the response uses the request's content type;
success is an (empty or partial-success) Export*ServiceResponse whose message names every
rejected span, log record or data point and the reason; errors carry a google.rpc.Status.
A 2xx answer means the request (redacted under the workspace's identity policy) and what
was read from it are committed.
"""

from __future__ import annotations

import zlib

import orjson
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from governance.models import Role
from governance.services import TokenRejected, api_token_authenticate
from traces.formats.otlp import OtlpDecodeError
from traces.services import otlp_logs_receive, otlp_metrics_receive, otlp_receive

MAX_BODY = 64 * 1024 * 1024
# Content-Encoding -> zlib wbits: gzip framing, or zlib framing for deflate (RFC 9110),
# which the OpenTelemetry exporters offer besides gzip.
COMPRESSED = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# gRPC status codes used in google.rpc.Status.
INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED = 3, 16, 7, 8


def _kind(content_type: str) -> str | None:
    base = content_type.split(";")[0].strip().lower()
    if base in {PROTOBUF, "application/protobuf"}:
        return PROTOBUF
    if base == JSON:
        return JSON
    return None


def _error(kind: str | None, http_status: int, code: int, message: str) -> HttpResponse:
    if kind == PROTOBUF:
        body = status_pb2.Status(code=code, message=message).SerializeToString()
        return HttpResponse(body, status=http_status, content_type=PROTOBUF)
    return HttpResponse(
        orjson.dumps({"code": code, "message": message}), status=http_status, content_type=JSON
    )


# signal -> (receive service, response message, partial-success field, JSON field, noun)
SIGNALS = {
    "traces": (otlp_receive, ExportTraceServiceResponse, "rejected_spans", "rejectedSpans", "span"),
    "logs": (otlp_logs_receive, ExportLogsServiceResponse, "rejected_log_records",
             "rejectedLogRecords", "log record"),
    "metrics": (otlp_metrics_receive, ExportMetricsServiceResponse, "rejected_data_points",
                "rejectedDataPoints", "data point"),
}  # fmt: skip
SHOWN_REJECTIONS = 20


def _success(kind: str, signal: str, rejected: list[tuple[str, str]]) -> HttpResponse:
    _, response_class, field, json_field, noun = SIGNALS[signal]
    message = ""
    if rejected:
        shown = "; ".join(
            f"{noun} {where}: {reason}" for where, reason in rejected[:SHOWN_REJECTIONS]
        )
        more = (
            f" (and {len(rejected) - SHOWN_REJECTIONS} more)"
            if len(rejected) > SHOWN_REJECTIONS
            else ""
        )
        message = f"{len(rejected)} {noun}(s) rejected: {shown}{more}"
    if kind == PROTOBUF:
        response = response_class()
        if rejected:
            setattr(response.partial_success, field, len(rejected))
            response.partial_success.error_message = message
        return HttpResponse(response.SerializeToString(), content_type=PROTOBUF)
    body = (
        {"partialSuccess": {json_field: str(len(rejected)), "errorMessage": message}}
        if rejected
        else {}
    )
    return HttpResponse(orjson.dumps(body), content_type=JSON)


@csrf_exempt
@login_not_required
@require_POST
def receive_traces(request):
    return _receive(request, "traces")


@csrf_exempt
@login_not_required
@require_POST
def receive_logs(request):
    return _receive(request, "logs")


@csrf_exempt
@login_not_required
@require_POST
def receive_metrics(request):
    return _receive(request, "metrics")


def _receive(request, signal: str):
    kind = _kind(request.META.get("CONTENT_TYPE", ""))
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, raw_token = header.partition(" ")
    if scheme.lower() != "bearer" or not raw_token.strip():
        response = _error(kind, 401, UNAUTHENTICATED, "Send Authorization: Bearer <token>.")
        response["WWW-Authenticate"] = 'Bearer realm="otlp"'
        return response
    try:
        token, membership = api_token_authenticate(raw=raw_token.strip())
    except TokenRejected as exc:
        return _error(kind, 401, UNAUTHENTICATED, str(exc))
    if membership.role < Role.EDITOR:
        return _error(kind, 403, PERMISSION_DENIED, f"Sending {signal} needs the editor role.")
    if kind is None:
        return _error(
            JSON,
            415,
            INVALID_ARGUMENT,
            "Content-Type must be application/x-protobuf or application/json.",
        )
    if int(request.META.get("CONTENT_LENGTH") or 0) > MAX_BODY:
        return _error(kind, 413, RESOURCE_EXHAUSTED, f"Request body exceeds {MAX_BODY:,} bytes.")
    body = request.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        return _error(kind, 413, RESOURCE_EXHAUSTED, f"Request body exceeds {MAX_BODY:,} bytes.")
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "").lower()
    if encoding in COMPRESSED:
        try:
            decompressor = zlib.decompressobj(COMPRESSED[encoding])
            body = decompressor.decompress(body, MAX_BODY + 1)
        except zlib.error as exc:
            return _error(kind, 400, INVALID_ARGUMENT, f"Body is not valid {encoding}: {exc}")
        if len(body) > MAX_BODY or decompressor.unconsumed_tail:
            return _error(
                kind, 413, RESOURCE_EXHAUSTED, f"Decompressed body exceeds {MAX_BODY:,} bytes."
            )
    elif encoding not in {"", "identity"}:
        return _error(
            kind,
            415,
            INVALID_ARGUMENT,
            f"Unsupported Content-Encoding {encoding!r}; use gzip or deflate.",
        )
    receive = SIGNALS[signal][0]
    try:
        result = receive(workspace=token.workspace, user=token.user, body=body, content_type=kind)
    except OtlpDecodeError as exc:
        return _error(kind, 400, INVALID_ARGUMENT, str(exc))
    return _success(kind, signal, result.rejected)
