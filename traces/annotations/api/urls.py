"""Annotations API routes under /api/v1/ (the divergence aggregates live under analytics/)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from traces.annotations.api import views

router = SimpleRouter()
router.register("divergences", views.DivergenceViewSet, basename="divergence")
router.register("annotation-queues", views.AnnotationQueueViewSet, basename="annotation-queue")

urlpatterns = [
    path(
        "analytics/divergence-by-band/",
        views.DivergenceByBandView.as_view(),
        name="divergence-by-band",
    ),
    path(
        "analytics/divergence-vs-lab/",
        views.DivergenceVsLabView.as_view(),
        name="divergence-vs-lab",
    ),
    *router.urls,
]
