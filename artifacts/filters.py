"""One FilterSet for the artifacts page and the API list: by run, command and status."""

import django_filters
from django.db.models import Q
from django.utils import timezone

from artifacts.models import Artifact, ArtifactState
from governance.filters import sort_filter

STATUS_CHOICES = [
    ("available", "available (complete)"),
    ("truncated", "available (truncated)"),
    ("expired", "expired"),
    ("deleted", "deleted"),
]


class ArtifactFilter(django_filters.FilterSet):
    run_id = django_filters.CharFilter(label="Run")
    command = django_filters.CharFilter(lookup_expr="icontains", label="Command contains")
    tool_call_id = django_filters.CharFilter(label="Tool call")
    status = django_filters.ChoiceFilter(
        choices=STATUS_CHOICES, method="filter_status", label="Status", empty_label="Any status"
    )
    sort = sort_filter(
        created="created_at",
        bytes="size_bytes",
        tokens="estimated_tokens",
        lines="line_count",
        run="run_id",
    )

    class Meta:
        model = Artifact
        fields = ["run_id", "command", "tool_call_id", "status"]

    def filter_status(self, queryset, name, value):
        # Expiry counts from expires_at, not from when the purge gets round to marking it.
        now = timezone.now()
        live = Q(state=ArtifactState.AVAILABLE, expires_at__gt=now)
        lapsed = Q(state=ArtifactState.AVAILABLE, expires_at__lte=now)
        return {
            "available": queryset.filter(live, complete=True),
            "truncated": queryset.filter(live, complete=False),
            "expired": queryset.filter(Q(state=ArtifactState.EXPIRED) | lapsed),
            "deleted": queryset.filter(state=ArtifactState.DELETED),
        }.get(value, queryset)
