"""Pages under /w/<workspace>/qualification/."""

from django.urls import path
from django.views.generic import RedirectView

from qualification import views

app_name = "qualification"

urlpatterns = [
    # Sweeps, limits and audits are siblings, so each sidebar entry highlights alone.
    path("", RedirectView.as_view(pattern_name="qualification:list"), name="home"),
    path("sweeps/", views.QualificationListView.as_view(), name="list"),
    path("sweeps/new/", views.QualificationCreateView.as_view(), name="create"),
    path("sweeps/<int:pk>/", views.QualificationDetailView.as_view(), name="detail"),
    path("sweeps/<int:pk>/upload/", views.QualificationUploadView.as_view(), name="upload"),
    path("sweeps/<int:pk>/analyse/", views.QualificationAnalyseView.as_view(), name="analyse"),
    path("sweeps/<int:pk>/lock/", views.QualificationLockView.as_view(), name="lock"),
    path("sweeps/<int:pk>/trials/", views.TrialListView.as_view(), name="trials"),
    path("sweeps/<int:pk>/trials.csv", views.TrialsCsvView.as_view(), name="trials_csv"),
    path("sweeps/<int:pk>/results.csv", views.ResultsCsvView.as_view(), name="results_csv"),
    path("sweeps/<int:pk>/propose-limit/", views.LimitProposeView.as_view(), name="limit_propose"),
    path("limits/", views.LimitListView.as_view(), name="limit_list"),
    path("limits/<int:pk>/", views.LimitDetailView.as_view(), name="limit_detail"),
    path("limits/<int:pk>/edit/", views.LimitEditView.as_view(), name="limit_edit"),
    path("limits/<int:pk>/approve/", views.LimitApproveView.as_view(), name="limit_approve"),
    path("limits/<int:pk>/withdraw/", views.LimitWithdrawView.as_view(), name="limit_withdraw"),
    path("limits/<int:pk>/check/", views.LimitCheckView.as_view(), name="limit_check"),
    path("audits/", views.AuditListView.as_view(), name="audit_list"),
    path("audits/<int:pk>/", views.AuditDetailView.as_view(), name="audit_detail"),
]
