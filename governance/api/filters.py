"""API ordering: a FilterSet's `sort` (the names pages use) first, DRF's `ordering=` second."""

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
