"""Context-file API routes under /api/v1/."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from qualification.contextfiles.api import views

router = SimpleRouter()
router.register("context-files", views.ContextFileViewSet, basename="context-file")
router.register("instructions", views.InstructionViewSet, basename="instruction")
router.register(
    "repository-listings", views.RepositoryListingViewSet, basename="repository-listing"
)
router.register(
    "command-verifications", views.CommandVerificationViewSet, basename="command-verification"
)
router.register(
    "context-file-evaluations", views.EvaluationViewSet, basename="context-file-evaluation"
)

urlpatterns = [
    path("paired-comparison/", views.PairedComparisonView.as_view(), name="paired-comparison"),
    *router.urls,
]
