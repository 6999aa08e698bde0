"""The OTLP/HTTP receiver lives at the root (/v1/traces), as OTLP exporters expect."""

urlpatterns: list = []
