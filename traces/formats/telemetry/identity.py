"""The identity redaction applied to every OTLP body (logs, metrics and traces) before it
is stored: the identity attributes hashed (a keyed hash) or dropped. No Django."""

from __future__ import annotations

import hashlib
import hmac

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from traces.formats.telemetry.common import (
    IDENTITY_DROP,
    IDENTITY_KEEP,
    IDENTITY_KEYS,
    IDENTITY_SET,
    _any_value,
)
from traces.formats.telemetry.decoding import decode


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
