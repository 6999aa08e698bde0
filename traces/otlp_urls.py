"""The OTLP/HTTP receiver lives at the root (/v1/traces), as OTLP exporters expect."""

from django.urls import path

from traces.otlp import receive_traces

urlpatterns = [path("v1/traces", receive_traces, name="otlp-traces")]
