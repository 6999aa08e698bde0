"""Pages under /w/<workspace>/traces/."""

from django.urls import path

from traces import views

app_name = "traces"

urlpatterns = [
    path("", views.SessionListView.as_view(), name="session_list"),
    path("upload/", views.UploadView.as_view(), name="upload"),
    path("sessions/<int:pk>/", views.SessionDetailView.as_view(), name="session_detail"),
    path("task-types/", views.TaskTypesView.as_view(), name="task_types"),
    path("reconciliation/", views.ReconciliationView.as_view(), name="reconciliation"),
    path("telemetry/settings/", views.TelemetrySettingsView.as_view(), name="telemetry_settings"),
    path("hooks/settings/", views.HookSettingsView.as_view(), name="hook_settings"),
]
