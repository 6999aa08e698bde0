"""The sort vocabulary shared by pages and the API: each FilterSet names its sorts once."""

import django_filters

from governance import labels
from governance.models import AuditEvent, Job, JobStatus

SORT_PARAM = "sort"


def sort_filter(**names: str) -> django_filters.OrderingFilter:
    """`sort=<name>` or `sort=-<name>`, with `names` as {name: model field}.

    The FilterSet's `sort` orders API lists; WorkspaceListView reads the same names for the
    page's sortable headers.
    """
    return django_filters.OrderingFilter(
        fields={field: name for name, field in names.items()},
        label="Sort",
        empty_label="Default order",
        help_text=f"One of {', '.join(names)}; prefix '-' for descending.",
    )


class JobFilter(django_filters.FilterSet):
    """The jobs list: by kind, status and what the job was about."""

    kind = django_filters.ChoiceFilter(
        choices=list(labels.JOB_KINDS.items()), empty_label="Any kind"
    )
    status = django_filters.ChoiceFilter(choices=JobStatus.choices, empty_label="Any status")
    q = django_filters.CharFilter(
        field_name="label", lookup_expr="icontains", label="What contains"
    )
    sort = sort_filter(created="created_at", kind="kind", status="status")

    class Meta:
        model = Job
        fields = ["kind", "status"]


class AuditEventFilter(django_filters.FilterSet):
    """The audit log: events about one kind of object (`action` is the code's prefix)."""

    action = django_filters.ChoiceFilter(
        choices=sorted(labels.AUDIT_OBJECTS.items(), key=lambda item: item[1]),
        method="filter_action",
        label="About",
        empty_label="Anything",
    )

    class Meta:
        model = AuditEvent
        fields = ["action"]

    def filter_action(self, queryset, name, value):
        return queryset.filter(action__startswith=f"{value}.")
