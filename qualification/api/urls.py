"""Qualification API routes under /api/v1/."""

from rest_framework.routers import SimpleRouter

from qualification.api import views

router = SimpleRouter()
router.register("qualifications", views.QualificationViewSet, basename="qualification")
router.register("model-configurations", views.ConfigurationViewSet, basename="model-configuration")
router.register("workloads", views.WorkloadViewSet, basename="workload")
router.register("operating-limits", views.OperatingLimitViewSet, basename="operating-limit")
router.register("budget-checks", views.BudgetCheckViewSet, basename="budget-check")

urlpatterns = [*router.urls]
