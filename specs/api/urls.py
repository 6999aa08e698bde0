"""Specifications API routes under /api/v1/."""

from rest_framework.routers import SimpleRouter

from specs.api import views

router = SimpleRouter()
router.register("specs", views.SpecViewSet, basename="spec")
router.register("spec-versions", views.SpecVersionViewSet, basename="spec-version")
router.register("survival-verdicts", views.SurvivalVerdictViewSet, basename="survival-verdict")
router.register("restart-packages", views.RestartPackageViewSet, basename="restart-package")

urlpatterns = [*router.urls]
