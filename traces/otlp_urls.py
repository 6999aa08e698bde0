"""The OTLP/HTTP receivers live at the root (/v1/traces, /v1/logs, /v1/metrics), as OTLP
exporters expect."""

from django.urls import path

from traces.otlp import receive_logs, receive_metrics, receive_traces

urlpatterns = [
    path("v1/traces", receive_traces, name="otlp-traces"),
    path("v1/logs", receive_logs, name="otlp-logs"),
    path("v1/metrics", receive_metrics, name="otlp-metrics"),
]
