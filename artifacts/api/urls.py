"""Artifacts API routes under /api/v1/."""

from rest_framework.routers import SimpleRouter

from artifacts.api import views

router = SimpleRouter()
router.register("artifacts", views.ArtifactViewSet, basename="artifact")
router.register(
    "artifact-write-failures", views.WriteFailureViewSet, basename="artifact-write-failure"
)

urlpatterns = [*router.urls]
