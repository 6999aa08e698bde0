"""API: every counted correction after compaction, paged, for audit."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from governance.api.pagination import StandardPagination
from governance.models import Role
from traces.analytics.api.views import FILTER_PARAMETERS
from traces.analytics.forms import AnalyticsFilterForm
from traces.analytics.post_compaction_corrections import (
    MATCHED_NOW,
    STORED,
    corrections_for,
)

# The analytics filters that select corrections (the others set other analyses' parameters).
CORRECTION_FILTERS = {
    "started_after", "started_before", "harness", "model", "project", "task_type", "exclude_forks",
}  # fmt: skip

DESCRIPTION = """\
Every operator message that behaviour after compaction counts as a correction (its
`matches_total` for the same filters), with the phrase it matched, so that each can be
audited; in session and call order, paged (`page`, `page_size` up to 1,000). The cached
section (`GET /api/v1/analytics/post-compaction/`) keeps only the first 2,000; this list
has them all, read now from the match stored with each call under the workspace's current
phrase list (`phrase_list_version`). A call whose stored match predates that list (the
section is being recomputed) is matched for this answer, without storing anything, and
marked `"match": "matched now"` (`matched_now` counts them). The observed messages are
those of the section: operator messages (not tool results, compaction summaries, meta or
command messages) of the main thread's first 150 calls after each full compaction, for
the same filters. The same rows download as CSV from the page
(`/w/{workspace}/analytics/post-compaction/corrections.csv`)."""


class CorrectionSerializer(serializers.Serializer):
    session = serializers.IntegerField(help_text="The session's id.")
    call_index = serializers.IntegerField(help_text="The call's position in its session.")
    call = serializers.IntegerField(help_text="The call's id.")
    run = serializers.IntegerField(help_text="The run the compaction started (its id).")
    step = serializers.IntegerField(help_text="Steps since the compaction: 1 is the first call.")
    trigger = serializers.CharField(help_text="auto, manual or unknown.")
    task_type = serializers.CharField(help_text="The run's task type.")
    phrase = serializers.CharField(help_text="The first phrase of the list that occurs.")
    matched = serializers.CharField(help_text="The text it matched in the message.")
    excerpt = serializers.CharField(help_text="Up to 240 characters of the message around it.")
    match = serializers.ChoiceField(
        choices=[STORED, MATCHED_NOW],
        help_text="stored: the match stored with the call; matched now: its stored match "
        "predates the current phrase list, matched for this answer.",
    )


class CorrectionPagination(StandardPagination):
    """Pages of corrections, with the phrase list version and how many were matched now."""

    def paginate_queryset(self, queryset, request, view=None):
        self.corrections = queryset
        return super().paginate_queryset(queryset, request, view)

    def get_paginated_response(self, data):
        response = super().get_paginated_response(data)
        response.data["phrase_list_version"] = self.corrections.phrase_list_version
        response.data["matched_now"] = self.corrections.stale
        return response

    def get_paginated_response_schema(self, schema):
        paged = super().get_paginated_response_schema(schema)
        paged["properties"]["phrase_list_version"] = {
            "type": "integer",
            "description": "The phrase list the corrections were matched with.",
        }
        paged["properties"]["matched_now"] = {
            "type": "integer",
            "description": "Corrections whose stored match was stale, matched for this answer.",
        }
        paged["required"] = [*paged.get("required", []), "phrase_list_version", "matched_now"]
        return paged


class PostCompactionCorrectionsView(GenericAPIView):
    read_role = Role.VIEWER
    serializer_class = CorrectionSerializer
    pagination_class = CorrectionPagination
    filter_backends = []  # the analytics filters below, read by the analytics form

    @extend_schema(
        summary="Every counted correction after compaction, with its matched phrase",
        description=DESCRIPTION,
        parameters=[p for p in FILTER_PARAMETERS if p.name in CORRECTION_FILTERS],
        responses={200: CorrectionSerializer(many=True)},
    )
    def get(self, request):
        params = request.query_params.copy()
        for paging in ("page", "page_size"):
            params.pop(paging, None)
        form = AnalyticsFilterForm(params or None, workspace=request.workspace)
        if form.is_bound and not form.is_valid():
            return Response(dict(form.errors), status=status.HTTP_400_BAD_REQUEST)
        corrections = corrections_for(workspace=request.workspace, filters=form.filters())
        page = self.paginate_queryset(corrections)
        return self.get_paginated_response(CorrectionSerializer(page, many=True).data)
