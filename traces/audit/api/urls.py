"""Audit API routes under /api/v1/ (the JSONL exports end in .jsonl, without a slash)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from traces.audit.api import views

router = SimpleRouter()
router.register("audits", views.AuditViewSet, basename="audit")

urlpatterns = [
    path(
        "audits/<int:pk>/packets.jsonl",
        views.AuditViewSet.as_view({"get": "packets_jsonl"}),
        name="audit-packets-jsonl",
    ),
    path(
        "audits/<int:pk>/judgments.jsonl",
        views.AuditViewSet.as_view({"get": "judgments_jsonl"}),
        name="audit-judgments-jsonl",
    ),
    *router.urls,
]
