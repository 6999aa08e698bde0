"""Pages under /w/<workspace>/audits/."""

from django.urls import path

from traces.audit import views

app_name = "audit"

urlpatterns = [
    path("", views.AuditListView.as_view(), name="list"),
    path("new/", views.AuditCreateView.as_view(), name="create"),
    path("<int:pk>/", views.AuditDetailView.as_view(), name="detail"),
    path("<int:pk>/status/", views.AuditStatusView.as_view(), name="status"),
    path("<int:pk>/judge/", views.AuditJudgeView.as_view(), name="judge"),
    path("<int:pk>/steps/<int:step>/", views.AuditJudgeView.as_view(), name="judge_step"),
    path("<int:pk>/results/", views.AuditResultsView.as_view(), name="results"),
    path("<int:pk>/packets.jsonl", views.PacketsJsonlView.as_view(), name="packets_jsonl"),
    path("<int:pk>/judgments.jsonl", views.JudgmentsJsonlView.as_view(), name="judgments_jsonl"),
]
