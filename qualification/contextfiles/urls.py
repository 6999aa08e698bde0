"""Pages under /w/<workspace>/context-files/."""

from django.urls import path

from qualification.contextfiles import views

app_name = "contextfiles"

urlpatterns = [
    path("", views.FileListView.as_view(), name="file_list"),
    path("import/", views.ImportView.as_view(), name="file_import"),
    path("listings/", views.ListingsView.as_view(), name="listings"),
    path("calculator/", views.CalculatorView.as_view(), name="calculator"),
    path("<int:pk>/", views.FileDetailView.as_view(), name="file_detail"),
    path("<int:pk>/instructions/<int:ipk>/", views.InstructionView.as_view(), name="instruction"),
    path("<int:pk>/drift-checks/", views.DriftCheckStartView.as_view(), name="drift_check_start"),
    path("<int:pk>/verifications/", views.VerificationView.as_view(), name="verify"),
    path("<int:pk>/settings/", views.FileSettingsView.as_view(), name="file_settings"),
    path("evaluations/new/", views.EvaluationCreateView.as_view(), name="evaluation_create"),
    path("evaluations/<int:pk>/", views.EvaluationDetailView.as_view(), name="evaluation_detail"),
    path(
        "evaluations/<int:pk>/change/",
        views.EvaluationChangeView.as_view(),
        name="evaluation_change",
    ),
    path("evaluations/<int:pk>/trials/", views.TrialUploadView.as_view(), name="trial_upload"),
    path("evaluations/<int:pk>/trials.csv", views.TrialsCsvView.as_view(), name="trials_csv"),
    path("evaluations/<int:pk>/decisions/", views.DecisionView.as_view(), name="decide"),
]
