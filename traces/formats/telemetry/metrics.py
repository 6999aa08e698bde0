"""OTLP metrics (Claude Code's token and cost counters) into metric points. No Django."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from traces.formats.telemetry.common import (
    MAX_COST_USD,
    MAX_TOKENS,
    TEMPORALITY_NAMES,
    USAGE_METRICS,
    Rejected,
    _digest,
    _session_id,
    _text,
    _time,
    attributes_dict,
    harness_of,
)


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
