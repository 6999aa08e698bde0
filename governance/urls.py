"""Project URLs. Pages live under /w/<workspace>/; the API under /api/v1/."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from governance import views

api_v1 = [
    path("", include("governance.api.urls")),
    path("", include("traces.api.urls")),
    path("", include("traces.analytics.api.urls")),
    path("", include("traces.annotations.api.urls")),
    path("", include("traces.audit.api.urls")),
    path("", include("traces.pricing.api.urls")),
    path("", include("qualification.api.urls")),
    path("", include("qualification.contextfiles.api.urls")),
    path("", include("specs.api.urls")),
    path("", include("artifacts.api.urls")),
]

workspace_pages = [
    path("", views.DashboardView.as_view(), name="dashboard"),
    path("jobs/", views.JobListView.as_view(), name="job_list"),
    path("jobs/<int:pk>/", views.JobDetailView.as_view(), name="job_detail"),
    path("settings/members/", views.MembersView.as_view(), name="members"),
    path("settings/tokens/", views.TokensView.as_view(), name="tokens"),
    path("settings/audit/", views.AuditLogView.as_view(), name="audit_log"),
    path("traces/", include("traces.urls")),
    path("analytics/", include("traces.analytics.urls")),
    path("annotations/", include("traces.annotations.urls")),
    path("audits/", include("traces.audit.urls")),
    path("prices/", include("traces.pricing.urls")),
    path("qualification/", include("qualification.urls")),
    path("context-files/", include("qualification.contextfiles.urls")),
    path("specs/", include("specs.urls")),
    path("artifacts/", include("artifacts.urls")),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/login/", login_not_required(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("workspaces/switch/", views.workspace_switch, name="workspace_switch"),
    path("invitations/", views.InvitationsView.as_view(), name="invitations"),
    path("w/<slug:workspace>/", include(workspace_pages)),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # A page for people: signed out, it sends them to the login page (DRF views skip the
    # login middleware and would answer a bare 401).
    path(
        "api/docs/",
        login_required(
            SpectacularSwaggerSplitView.as_view(
                url_name="api-schema", template_name="governance/swagger_ui.html"
            )
        ),
        name="api-docs",
    ),
    path("", include("traces.otlp_urls")),
    path("admin/", admin.site.urls),
]

handler404 = "governance.error_pages.page_not_found"
handler403 = "governance.error_pages.permission_denied"
