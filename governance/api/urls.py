"""Core API routes; each domain app adds its own under /api/v1/."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from governance.api import views

router = SimpleRouter()
router.register("jobs", views.JobViewSet, basename="job")
router.register("audit-events", views.AuditEventViewSet, basename="audit-event")
router.register("members", views.MembershipViewSet, basename="member")
router.register("invitations", views.InvitationViewSet, basename="invitation")
router.register("tokens", views.ApiTokenViewSet, basename="token")

urlpatterns = [
    path("workspace/", views.CurrentWorkspaceView.as_view(), name="current-workspace"),
    *router.urls,
]
