"""Trace filters: the one text match (for the sessions list, its API and the analytics),
and one FilterSet for the sessions page and the sessions API."""

import django_filters
from django import forms
from django.db.models import F, Lookup, Q

from governance.filters import sort_filter
from traces.models import Harness, Session
from traces.selectors import sessions_of_job


def text_contains(field: str, value: str) -> Q:
    """`field` contains `value`, ignoring case, with `%`, `_` and `\\` matched literally.

    This is Django's `icontains`, which escapes the pattern and ignores case on every
    backend (PostgreSQL: UPPER(…) LIKE UPPER(…); SQLite: LIKE, which ignores the case of
    ASCII letters only). Every text filter on traces goes through here."""
    return Q(**{f"{field}__icontains": value})


class ItemContains(Lookup):
    """An item of a JSON list of strings contains the value, matched as `text_contains`
    matches (the SQL of Django's `icontains` applied to each item)."""

    lookup_name = "item_icontains"
    prepare_rhs = False

    def get_db_prep_lookup(self, value, connection):
        return "%s", [f"%{connection.ops.prep_for_like_query(value)}%"]

    def _match(self, compiler, connection, items_sql: str) -> tuple[str, list]:
        """`items_sql`: the list's items as a table `item` with a text column `value`."""
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        item = connection.ops.lookup_cast("icontains", "CharField") % "item.value"
        condition = f"{item} {connection.operators['icontains'] % rhs}"
        return (
            # Compiled column and operator SQL only; the value is a parameter.
            f"EXISTS (SELECT 1 FROM {items_sql % lhs} WHERE {condition})",  # noqa: S608
            [*lhs_params, *rhs_params],
        )

    def as_postgresql(self, compiler, connection):
        return self._match(compiler, connection, "jsonb_array_elements_text(%s) AS item(value)")

    def as_sqlite(self, compiler, connection):
        return self._match(compiler, connection, "json_each(%s) AS item")

    def as_sql(self, compiler, connection):
        raise NotImplementedError(f"ItemContains has no SQL for {connection.vendor}")


def sessions_with_model(value: str) -> ItemContains:
    """Sessions with a call to a model whose name contains `value`, read from the models
    kept per session (`Session.model_names`): never a scan of the calls."""
    return ItemContains(F("model_names"), value)


class IntegerFilter(django_filters.NumberFilter):
    """A whole number: NumberFilter's decimal field takes "1.5" and "1e30"."""

    field_class = forms.IntegerField


class SessionFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_text", label="Search")
    harness = django_filters.ChoiceFilter(choices=Harness.choices, empty_label="Any harness")
    model = django_filters.CharFilter(method="filter_model", label="Model", max_length=200)
    project = django_filters.CharFilter(method="filter_project", label="Project", max_length=300)
    started_after = django_filters.DateFilter(
        field_name="started_at", lookup_expr="date__gte", label="Started on or after",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    started_before = django_filters.DateFilter(
        field_name="started_at", lookup_expr="date__lte", label="Started on or before",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    ingested_after = django_filters.DateFilter(
        field_name="last_ingested_at", lookup_expr="date__gte", label="Ingested on or after",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    job = IntegerFilter(
        method="filter_job", label="From upload (job #)", min_value=1, max_value=2**63 - 1,
        help_text="Sessions whose calls an ingest job read, or found already read.",
    )  # fmt: skip

    sort = sort_filter(
        started="started_at",
        ingested="last_ingested_at",
        calls="call_count",
        context="max_context",
        compactions="compaction_count",
        agents="agent_count",
        output="output_tokens",
    )

    class Meta:
        model = Session
        fields = ["harness", "project"]

    def filter_text(self, queryset, name, value):
        return queryset.filter(
            text_contains("external_id", value)
            | text_contains("title", value)
            | text_contains("project", value)
        )

    def filter_job(self, queryset, name, value):
        return queryset.filter(pk__in=sessions_of_job(job_id=value).values("pk"))

    def filter_project(self, queryset, name, value):
        return queryset.filter(text_contains("project", value))

    def filter_model(self, queryset, name, value):
        return queryset.filter(sessions_with_model(value))
