"""Pages under /w/<workspace>/analytics/."""

from django.urls import path

from traces.analytics import instruction_visibility_views as iv_views
from traces.analytics import post_compaction_views as pc_views
from traces.analytics import survival_views, views

app_name = "analytics"

urlpatterns = [
    path("", views.CostPage.as_view(), name="cost"),
    path("steps/", views.StepsPage.as_view(), name="steps"),
    path("compactions/", views.CompactionsPage.as_view(), name="compactions"),
    path("coverage/", views.CoveragePage.as_view(), name="coverage"),
    path("incidents/", views.IncidentsPage.as_view(), name="incidents"),
    path("what-if/", views.WhatIfPage.as_view(), name="what_if"),
    path("data/<slug:name>.csv", views.CsvView.as_view(), name="csv"),
    path("steps/data/<slug:name>.csv", views.CsvView.as_view()),
    path("compactions/data/<slug:name>.csv", views.CsvView.as_view()),
    path("coverage/data/<slug:name>.csv", views.CsvView.as_view()),
    path("incidents/data/<slug:name>.csv", views.CsvView.as_view()),
    path("what-if/data/<slug:name>.csv", views.CsvView.as_view()),
    path("compaction-survival/", survival_views.SurvivalPage.as_view(), name="survival"),
    path("post-compaction/", pc_views.PostCompactionPage.as_view(), name="post_compaction"),
    path(
        "post-compaction/corrections.csv",
        pc_views.CorrectionsCsv.as_view(),
        name="post_compaction_csv",
    ),
    path("post-compaction/phrases/", pc_views.PhraseListPage.as_view(), name="correction_phrases"),
    path(
        "instruction-visibility/",
        iv_views.InstructionVisibilityPage.as_view(),
        name="instruction_visibility",
    ),
    path(
        "instruction-visibility/data/<slug:name>.csv",
        iv_views.InstructionVisibilityCsv.as_view(),
        name="instruction_visibility_csv",
    ),
]
