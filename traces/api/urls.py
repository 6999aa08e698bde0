"""Traces API routes under /api/v1/."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from traces.api import views

router = SimpleRouter()
router.register("trace-uploads", views.TraceUploadViewSet, basename="trace-upload")
router.register("ingest-jobs", views.IngestJobViewSet, basename="ingest-job")
router.register("sessions", views.SessionViewSet, basename="session")
router.register("hooks", views.HookEventViewSet, basename="hook-event")

urlpatterns = [
    *router.urls,
    path("telemetry/settings/", views.TelemetrySettingsView.as_view(), name="telemetry-settings"),
]
