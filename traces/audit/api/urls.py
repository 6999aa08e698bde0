"""Audit API routes under /api/v1/."""

from rest_framework.routers import SimpleRouter

from traces.audit.api import views

router = SimpleRouter()
router.register("audits", views.AuditViewSet, basename="audit")

urlpatterns = router.urls
