"""The sort vocabulary shared by pages and the API: each FilterSet names its sorts once."""

import django_filters

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
