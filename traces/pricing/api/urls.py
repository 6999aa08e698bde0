"""Prices API routes under /api/v1/."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from traces.pricing.api import views

router = SimpleRouter()
router.register("prices", views.PriceTableViewSet, basename="price-table")

urlpatterns = [
    path("sessions/<int:pk>/cost/", views.SessionCostView.as_view(), name="session-cost"),
    path("costs/by-agent/", views.SubagentCostView.as_view(), name="subagent-cost"),
    *router.urls,
]
