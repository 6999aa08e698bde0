"""FilterSets shared by pages and the API: marks, and the runs a queue samples from."""

from decimal import Decimal

import django_filters
from django import forms
from django.db.models import Exists, OuterRef

from traces.annotations.models import FAILURE_CLASS_CHOICES, Divergence, MarkKind, QueueItem
from traces.models import AgentKind, Call, Harness, Run, TaskType


class DivergenceFilter(django_filters.FilterSet):
    session = django_filters.NumberFilter(field_name="session_id", label="Session id")
    run = django_filters.NumberFilter(field_name="run_id", label="Run id")
    agent = django_filters.NumberFilter(field_name="agent_id", label="Agent id")
    failure_class = django_filters.ChoiceFilter(
        choices=FAILURE_CLASS_CHOICES, empty_label="Any class", label="Class"
    )
    kind = django_filters.ChoiceFilter(choices=MarkKind.choices, empty_label="Marks and final")
    annotator = django_filters.CharFilter(
        field_name="annotator__username", lookup_expr="iexact", label="Annotator"
    )
    model = django_filters.CharFilter(field_name="model", lookup_expr="icontains", label="Model")
    project = django_filters.CharFilter(
        field_name="session__project", lookup_expr="icontains", label="Project"
    )
    queue = django_filters.NumberFilter(method="filter_queue", label="Queue id")

    class Meta:
        model = Divergence
        fields = ["session", "run", "agent", "failure_class", "kind", "annotator", "model"]

    def filter_queue(self, queryset, name, value):
        return queryset.filter(run_id__in=QueueItem.objects.filter(queue_id=value).values("run_id"))


class RunFilter(django_filters.FilterSet):
    """Which runs a queue samples from, e.g. "runs over 150k in project X"."""

    project = django_filters.CharFilter(
        field_name="session__project", lookup_expr="icontains", label="Project contains"
    )
    model = django_filters.CharFilter(method="filter_model", label="Model contains")
    harness = django_filters.ChoiceFilter(
        field_name="session__harness",
        choices=Harness.choices,
        empty_label="Any harness",
        label="Harness",
    )
    task_type = django_filters.ChoiceFilter(
        choices=TaskType.choices, empty_label="Any task type", label="Task type"
    )
    agent_kind = django_filters.ChoiceFilter(
        field_name="agent__kind",
        choices=[(AgentKind.MAIN, "main threads"), (AgentKind.SUBAGENT, "subagents")],
        empty_label="Main threads and subagents",
        label="Agent",
    )
    min_context = django_filters.NumberFilter(
        field_name="max_context", lookup_expr="gte", label="Max context at least (tokens)"
    )
    max_context = django_filters.NumberFilter(
        field_name="max_context", lookup_expr="lte", label="Max context at most (tokens)"
    )
    min_calls = django_filters.NumberFilter(
        field_name="call_count", lookup_expr="gte", label="At least this many calls"
    )
    started_after = django_filters.DateFilter(
        field_name="started_at", lookup_expr="date__gte", label="Started on or after",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    started_before = django_filters.DateFilter(
        field_name="started_at", lookup_expr="date__lte", label="Started on or before",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    unmarked = django_filters.BooleanFilter(
        method="filter_unmarked",
        label="Only runs nobody has marked",
        widget=forms.CheckboxInput,
    )

    class Meta:
        model = Run
        fields: list[str] = []

    def filter_model(self, queryset, name, value):
        calls = Call.objects.filter(
            session_id=OuterRef("session_id"),
            agent_id=OuterRef("agent_id"),
            session_index__gte=OuterRef("first_call_index"),
            session_index__lte=OuterRef("last_call_index"),
            model__icontains=value,
        )
        return queryset.filter(Exists(calls))

    def filter_unmarked(self, queryset, name, value):
        if not value:
            return queryset
        marked = Divergence.objects.filter(run_id=OuterRef("pk"), replaced_at__isnull=True)
        return queryset.exclude(Exists(marked))


def criteria_of(filterset: RunFilter) -> dict:
    """The filter as stored on a queue: the non-empty cleaned values, as JSON."""
    out = {}
    for key, value in (filterset.form.cleaned_data or {}).items():
        if value in (None, "", False):
            continue
        if isinstance(value, Decimal):
            value = int(value) if value == value.to_integral_value() else float(value)
        out[key] = value.isoformat() if hasattr(value, "isoformat") else value
    return out
