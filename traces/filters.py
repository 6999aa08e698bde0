"""One FilterSet for the sessions page and the sessions API."""

import django_filters
from django import forms
from django.db.models import Q

from traces.models import Call, Harness, Session


class SessionFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_text", label="Search")
    harness = django_filters.ChoiceFilter(choices=Harness.choices, empty_label="Any harness")
    model = django_filters.CharFilter(method="filter_model", label="Model")
    project = django_filters.CharFilter(
        field_name="project", lookup_expr="icontains", label="Project"
    )
    started_after = django_filters.DateFilter(
        field_name="started_at", lookup_expr="date__gte", label="Started on or after",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    started_before = django_filters.DateFilter(
        field_name="started_at", lookup_expr="date__lte", label="Started on or before",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip

    class Meta:
        model = Session
        fields = ["harness", "project"]

    def filter_text(self, queryset, name, value):
        return queryset.filter(
            Q(external_id__icontains=value)
            | Q(title__icontains=value)
            | Q(project__icontains=value)
        )

    def filter_model(self, queryset, name, value):
        matching = Call.objects.filter(model__icontains=value).values("session_id")
        return queryset.filter(pk__in=matching)
