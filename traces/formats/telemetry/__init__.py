"""OTLP logs and metrics from Claude Code and Codex, into event and metric-point records,
and the identity redaction applied to every OTLP body (logs, metrics and traces) before
it is stored. No Django.

Every record that cannot be used is rejected with its path in the request (e.g.
`resourceLogs[0].scopeLogs[0].logRecords[3]`) and the reason; the rest of the request is
kept. By concern: `decoding` (bodies into messages), `identity` (redaction), `wire` (the
lean reading of log requests), `logs` (events), `metrics` (points), `common` (constants
and value reading).
"""

from traces.formats.telemetry.common import (
    CLAUDE_CODE,
    CODEX,
    COUNT_ATTRIBUTES,
    CUMULATIVE,
    DELTA,
    IDENTITY_DROP,
    IDENTITY_HASH,
    IDENTITY_KEEP,
    IDENTITY_KEYS,
    IDENTITY_SET,
    KNOWN_EVENTS,
    MAX_COST_USD,
    MAX_DURATION_MS,
    MAX_TOKENS,
    OTLP,
    TEMPORALITY_NAMES,
    USAGE_METRICS,
    Rejected,
    attributes_dict,
    harness_of,
)
from traces.formats.telemetry.decoding import MESSAGES, decode
from traces.formats.telemetry.identity import (
    identity_hash,
    may_hold_identity,
    redact,
    redacted_body,
)
from traces.formats.telemetry.logs import (
    EventRecord,
    LogsResult,
    decode_logs,
    encoded,
    event_name,
    normalise_logs,
)
from traces.formats.telemetry.metrics import MetricPoint, MetricsResult, normalise_metrics
from traces.formats.telemetry.wire import LeanLogsRequest, lean_logs

__all__ = [
    "CLAUDE_CODE", "CODEX", "COUNT_ATTRIBUTES", "CUMULATIVE", "DELTA", "IDENTITY_DROP",
    "IDENTITY_HASH", "IDENTITY_KEEP", "IDENTITY_KEYS", "IDENTITY_SET", "KNOWN_EVENTS",
    "MAX_COST_USD", "MAX_DURATION_MS", "MAX_TOKENS", "MESSAGES", "OTLP", "TEMPORALITY_NAMES",
    "USAGE_METRICS", "EventRecord", "LeanLogsRequest", "LogsResult", "MetricPoint",
    "MetricsResult", "Rejected", "attributes_dict", "decode", "decode_logs", "encoded", "event_name",
    "harness_of", "identity_hash", "lean_logs", "may_hold_identity", "normalise_logs",
    "normalise_metrics", "redact", "redacted_body",
]  # fmt: skip
