"""Pages under /w/<workspace>/artifacts/."""

from django.urls import path

from artifacts import views

app_name = "artifacts"

urlpatterns = [
    path("", views.ArtifactListView.as_view(), name="list"),
    path("settings/", views.ArtifactSettingsView.as_view(), name="settings"),
    path("<uuid:pk>/", views.ArtifactDetailView.as_view(), name="detail"),
    path("<uuid:pk>/content/", views.ArtifactContentView.as_view(), name="content"),
    path("<uuid:pk>/delete/", views.ArtifactDeleteView.as_view(), name="delete"),
]
