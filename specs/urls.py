"""Pages under /w/<workspace>/specs/."""

from django.urls import path

from specs import views
from specs.views import survival

app_name = "specs"

urlpatterns = [
    path("", views.SpecListView.as_view(), name="spec_list"),
    path("new/", views.SpecCreateView.as_view(), name="spec_create"),
    path("review/", views.ReviewQueueView.as_view(), name="review_queue"),
    path("suggest-key/", views.SuggestKeyView.as_view(), name="suggest_key"),
    path("versions/row/", views.EditorRowView.as_view(), name="editor_row"),
    path("versions/<int:pk>/", views.VersionDetailView.as_view(), name="version_detail"),
    path("versions/<int:pk>/edit/", views.VersionEditView.as_view(), name="version_edit"),
    path("versions/<int:pk>/diff/", views.VersionDiffView.as_view(), name="version_diff"),
    path("versions/<int:pk>/submit/", views.VersionSubmitView.as_view(), name="version_submit"),
    path("versions/<int:pk>/approve/", views.VersionApproveView.as_view(), name="version_approve"),
    path("versions/<int:pk>/reject/", views.VersionRejectView.as_view(), name="version_reject"),
    path("versions/<int:pk>/discard/", views.VersionDiscardView.as_view(), name="version_discard"),
    path(
        "versions/<int:pk>/export/<str:format>/",
        views.VersionExportView.as_view(),
        name="version_export",
    ),
    path("restart-packages/", views.PackageListView.as_view(), name="package_list"),
    path("restart-packages/new/", views.PackageCreateView.as_view(), name="package_create"),
    path("restart-packages/row/", views.PackageRowView.as_view(), name="package_row"),
    path("restart-packages/<int:pk>/", views.PackageDetailView.as_view(), name="package_detail"),
    path(
        "restart-packages/<int:pk>/export/<str:format>/",
        views.PackageExportView.as_view(),
        name="package_export",
    ),
    path(
        "restart-packages/<int:pk>/verifications/<int:position>/output/",
        views.PackageOutputView.as_view(),
        name="package_output",
    ),
    path(
        "survival/verdicts/<int:pk>/correct/",
        survival.VerdictCorrectView.as_view(),
        name="survival_correct",
    ),
    path(
        "survival/sessions/<int:session>/run/",
        survival.SessionSurvivalRunView.as_view(),
        name="survival_run",
    ),
    path("<slug:slug>/", views.SpecDetailView.as_view(), name="spec_detail"),
    path("<slug:slug>/edit/", views.SpecEditView.as_view(), name="spec_edit"),
    path("<slug:slug>/versions/new/", views.VersionCreateView.as_view(), name="version_create"),
    path("<slug:slug>/import/", views.VersionImportView.as_view(), name="version_import"),
]
