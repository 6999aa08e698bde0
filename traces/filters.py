"""Trace filters: the one text match (for the sessions list, its API and the analytics),
the one model choice (the workspace's models, matched whole), and one FilterSet for the
sessions page and the sessions API."""

import django_filters
from django import forms
from django.db.models import F, Lookup, Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from governance.filters import sort_filter
from traces.models import Harness, Session
from traces.selectors import sessions_of_job, workspace_models


def text_contains(field: str, value: str) -> Q:
    """`field` contains `value`, ignoring case, with `%`, `_` and `\\` matched literally.

    This is Django's `icontains`, which escapes the pattern and ignores case on every
    backend (PostgreSQL: UPPER(…) LIKE UPPER(…); SQLite: LIKE, which ignores the case of
    ASCII letters only). Every text filter on traces goes through here."""
    return Q(**{f"{field}__icontains": value})


class ItemEquals(Lookup):
    """A JSON list of strings holds the value as one whole item (`Session.model_names`)."""

    lookup_name = "item_equals"
    prepare_rhs = False

    def get_db_prep_lookup(self, value, connection):
        return "%s", [value]

    def _match(self, compiler, connection, items_sql: str) -> tuple[str, list]:
        """`items_sql`: the list's items as a table `item` with a text column `value`."""
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return (
            # Compiled column SQL only; the value is a parameter.
            f"EXISTS (SELECT 1 FROM {items_sql % lhs} WHERE item.value = {rhs})",  # noqa: S608
            [*lhs_params, *rhs_params],
        )

    def as_postgresql(self, compiler, connection):
        return self._match(compiler, connection, "jsonb_array_elements_text(%s) AS item(value)")

    def as_sqlite(self, compiler, connection):
        return self._match(compiler, connection, "json_each(%s) AS item")

    def as_sql(self, compiler, connection):
        raise NotImplementedError(f"ItemEquals has no SQL for {connection.vendor}")


def sessions_with_model(value: str) -> ItemEquals:
    """Sessions with a call to exactly the model `value`, read from the models kept per
    session (`Session.model_names`): never a scan of the calls."""
    return ItemEquals(F("model_names"), value)


ANY_MODEL = ("", "Any model")
LISTED = 8  # models named in an error message before "and N more"


def _named(models: list[str]) -> str:
    shown = ", ".join(models[:LISTED])
    return shown + (f" and {len(models) - LISTED} more" if len(models) > LISTED else "")


def unknown_model_message(value: str, models: list[str]) -> str:
    """Why `value` is not one of the workspace's `models`, and what to choose instead."""
    containing = [m for m in models if value.lower() in m.lower()]
    if containing:
        return (
            f"No model is named exactly {value!r}: the model filter takes one whole model "
            f"name. Models containing it: {_named(containing)}."
        )
    if models:
        return f"No call in this workspace used a model named {value!r}. Choose one of: {_named(models)}."
    return f"No call in this workspace used a model named {value!r}: no traces are ingested yet."


class ModelChoiceField(forms.ChoiceField):
    """One model of the workspace's traces, by its whole name: choices set per workspace
    (`set_models`). The same name in another case is taken as that model (links made when
    this filter matched any case still work); any other value is an error that names the
    models containing it, never an empty result."""

    def __init__(self, *, models=(), **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("label", "Model")
        super().__init__(choices=[ANY_MODEL], **kwargs)
        self.set_models(models)

    def set_models(self, models: list[str]) -> None:
        self.models = list(models)
        self.choices = [ANY_MODEL, *((name, name) for name in self.models)]

    def to_python(self, value):
        value = super().to_python(value).strip()
        if value and value not in self.models:
            same = [m for m in self.models if m.lower() == value.lower()]
            if len(same) == 1:
                return same[0]
        return value

    def validate(self, value):
        if value and value not in self.models:
            raise forms.ValidationError(  # a parameter: the value may hold a "%"
                "%(message)s",
                code="invalid_choice",
                params={"message": unknown_model_message(value, self.models)},
            )
        super().validate(value)


@extend_schema_field(OpenApiTypes.STR)  # a model name (the choices are per workspace)
class ModelFilter(django_filters.Filter):
    """Sessions with a call to the chosen model (`ModelChoiceField`): the one model filter
    of the sessions page, the sessions API and the analytics."""

    field_class = ModelChoiceField

    def filter(self, qs, value):
        return qs.filter(sessions_with_model(value)) if value else qs


class IntegerFilter(django_filters.NumberFilter):
    """A whole number: NumberFilter's decimal field takes "1.5" and "1e30"."""

    field_class = forms.IntegerField


class SessionFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_text", label="Search")
    harness = django_filters.ChoiceFilter(choices=Harness.choices, empty_label="Any harness")
    model = ModelFilter(label="Model", method="filter_model")
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

    def __init__(self, *args, request=None, **kwargs):
        super().__init__(*args, request=request, **kwargs)
        workspace = getattr(request, "workspace", None)
        models = workspace_models(workspace=workspace) if workspace is not None else []
        self.filters["model"].field.set_models(models)  # this FilterSet's own (deep) copy

    def filter_text(self, queryset, name, value):
        return queryset.filter(
            text_contains("external_id", value)
            | text_contains("title", value)
            | text_contains("project", value)
        )

    def filter_job(self, queryset, name, value):
        return queryset.filter(pk__in=sessions_of_job(job_id=value).values("pk"))

    def filter_model(self, queryset, name, value):
        return queryset.filter(sessions_with_model(value))

    def filter_project(self, queryset, name, value):
        return queryset.filter(text_contains("project", value))
