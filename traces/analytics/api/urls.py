"""Analytics API routes under /api/v1/."""

from django.urls import path

from traces.analytics.api import views
from traces.analytics.api.instruction_visibility import (
    InstructionVisibilityRunsView,
    InstructionVisibilityRunView,
    InstructionVisibilityView,
)
from traces.analytics.api.post_compaction import PostCompactionCorrectionsView
from traces.analytics.api.recommendations import CompactionRecommendationView

urlpatterns = [
    *[
        path(
            f"analytics/{name}/",
            views.AnalyticsSectionView.as_view(section=name),
            name=f"analytics-{name}",
        )
        for name in views.SECTIONS
    ],
    path(
        "analytics/post-compaction/corrections/",
        PostCompactionCorrectionsView.as_view(),
        name="analytics-post-compaction-corrections",
    ),
    path(
        "analytics/instruction-visibility/",
        InstructionVisibilityView.as_view(),
        name="analytics-instruction-visibility",
    ),
    path(
        "analytics/instruction-visibility/runs/",
        InstructionVisibilityRunsView.as_view(),
        name="analytics-instruction-visibility-runs",
    ),
    path(
        "analytics/instruction-visibility/runs/<int:pk>/",
        InstructionVisibilityRunView.as_view(),
        name="analytics-instruction-visibility-run",
    ),
    path(
        "analysis/compaction-cycle/",
        views.CompactionCycleView.as_view(),
        name="analysis-compaction-cycle",
    ),
    path(
        "recommendations/compaction/",
        CompactionRecommendationView.as_view(),
        name="recommendations-compaction",
    ),
]
