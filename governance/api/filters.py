"""API ordering: a FilterSet's `sort` (the names pages use) first, DRF's `ordering=` second."""

import django_filters.rest_framework
from django.db import models
from rest_framework import filters

from governance.filters import SORT_PARAM


class OrderingFilter(filters.OrderingFilter):
    """DRF's `ordering=` with a view's field names, kept for clients that already send it.

    When a request sends `sort` (the FilterSet's OrderingFilter, shared with the pages) and no
    `ordering`, the view's default ordering must not overwrite that sort.
    """

    def filter_queryset(self, request, queryset, view):
        params = request.query_params
        if SORT_PARAM in params and self.ordering_param not in params:
            return queryset
        return super().filter_queryset(request, queryset, view)


class IdFilterSet(django_filters.rest_framework.FilterSet):
    """A relation filters by id (`?context_file=12`), never by a choice of model rows.

    django-filter's default for a foreign key is a ModelChoiceFilter over every row of the
    related model: the browsable API's filter form would list other workspaces' objects.
    """

    FILTER_DEFAULTS = {
        **django_filters.rest_framework.FilterSet.FILTER_DEFAULTS,
        models.ForeignKey: {"filter_class": django_filters.NumberFilter},
        models.OneToOneField: {"filter_class": django_filters.NumberFilter},
    }


class FilterBackend(django_filters.rest_framework.DjangoFilterBackend):
    """DjangoFilterBackend whose generated FilterSets (`filterset_fields`) filter relations by id."""

    filterset_base = IdFilterSet
