"""Pages under /w/<workspace>/annotations/."""

from django.urls import path
from django.views.generic import RedirectView

from traces.annotations import views

app_name = "annotations"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="annotations:queue_list"), name="home"),
    path("queues/", views.QueueListView.as_view(), name="queue_list"),
    path("queues/<int:pk>/", views.QueueDetailView.as_view(), name="queue_detail"),
    path("queues/<int:pk>/next/", views.QueueNextView.as_view(), name="queue_next"),
    path("queues/<int:pk>/finish/", views.QueueFinishView.as_view(), name="queue_finish"),
    path("queues/<int:pk>/status/", views.QueueStatusView.as_view(), name="queue_status"),
    path("divergences/", views.DivergenceListView.as_view(), name="divergence_list"),
    path("divergences/divergences.csv", views.DivergencePointsCsv.as_view(), name="points_csv"),
    path("divergences/by-band.csv", views.DivergenceBandsCsv.as_view(), name="bands_csv"),
    path("sessions/<int:session>/", views.SessionViewerRedirect.as_view(), name="session_viewer"),
    path(
        "sessions/<int:session>/agents/<int:agent>/",
        views.ViewerView.as_view(),
        name="agent_viewer",
    ),
    path("sessions/<int:session>/runs/<int:run>/", views.ViewerView.as_view(), name="run_viewer"),
    path(
        "sessions/<int:session>/runs/<int:run>/adjudicate/",
        views.AdjudicateView.as_view(),
        name="adjudicate",
    ),
    path("sessions/<int:session>/mark/", views.MarkView.as_view(), name="mark"),
    path(
        "sessions/<int:session>/calls/<int:call_index>/part/",
        views.CallPartView.as_view(),
        name="call_part",
    ),
]
