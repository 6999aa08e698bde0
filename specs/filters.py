"""FilterSets shared by the page lists and the API lists."""

import django_filters
from django.db.models import Q

from governance.filters import sort_filter
from specs.models import Consequence, RestartPackage, Spec, SpecVersion, VersionStatus


class SpecFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    consequence = django_filters.ChoiceFilter(choices=Consequence.choices, empty_label="Any")
    pending = django_filters.BooleanFilter(method="filter_pending", label="Has a version in review")
    sort = sort_filter(title="title", updated="updated_at", consequence="consequence")

    class Meta:
        model = Spec
        fields = ["q", "consequence", "pending"]

    def search(self, queryset, name, value):
        return queryset.filter(
            Q(title__icontains=value) | Q(slug__icontains=value) | Q(summary__icontains=value)
        )

    def filter_pending(self, queryset, name, value):
        if value is None:
            return queryset
        return (
            queryset.filter(in_review_count__gt=0) if value else queryset.filter(in_review_count=0)
        )


class SpecVersionFilter(django_filters.FilterSet):
    spec = django_filters.NumberFilter(field_name="spec_id")
    status = django_filters.MultipleChoiceFilter(choices=VersionStatus.choices)
    sort = sort_filter(created="created_at", submitted="submitted_at", number="number")

    class Meta:
        model = SpecVersion
        fields = ["spec", "status"]


class RestartPackageFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    spec = django_filters.CharFilter(field_name="spec_version__spec__slug", label="Spec slug")
    superseded = django_filters.ChoiceFilter(
        method="filter_superseded",
        label="Pinned specification",
        choices=[("yes", "Superseded since"), ("no", "Still authoritative")],
        empty_label="Any",
    )
    trace_session = django_filters.NumberFilter(field_name="trace_session_id")
    sort = sort_filter(created="created_at", title="title")

    class Meta:
        model = RestartPackage
        fields = ["q", "spec", "superseded", "trace_session"]

    def search(self, queryset, name, value):
        return queryset.filter(
            Q(title__icontains=value)
            | Q(next_action__icontains=value)
            | Q(commit__istartswith=value)
        )

    def filter_superseded(self, queryset, name, value):
        authoritative = Q(spec_version__status=VersionStatus.AUTHORITATIVE)
        if value == "yes":
            return queryset.exclude(authoritative)
        return queryset.filter(authoritative) if value == "no" else queryset
