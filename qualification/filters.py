"""FilterSets shared by the pages and the API lists."""

import django_filters

from governance.filters import sort_filter
from qualification.models import (
    AssemblyAudit,
    Consequence,
    LimitStatus,
    OperatingLimit,
    Qualification,
    QualificationStatus,
    Trial,
)


class QualificationFilter(django_filters.FilterSet):
    model = django_filters.CharFilter(
        field_name="configuration__model_name", lookup_expr="icontains", label="Model"
    )
    workload = django_filters.CharFilter(
        field_name="workload__name", lookup_expr="icontains", label="Workload"
    )
    status = django_filters.ChoiceFilter(
        choices=QualificationStatus.choices, empty_label="Any status"
    )
    consequence = django_filters.ChoiceFilter(
        choices=Consequence.choices, empty_label="Any consequence"
    )

    sort = sort_filter(
        created="created_at",
        name="name",
        model="configuration__model_name",
        status="status",
        trials="trial_count",
    )

    class Meta:
        model = Qualification
        fields = ["model", "workload", "status", "consequence"]


class TrialFilter(django_filters.FilterSet):
    family = django_filters.CharFilter(field_name="task__family__key", label="Family")
    task = django_filters.CharFilter(field_name="task__external_id", label="Task")
    stratum = django_filters.NumberFilter(field_name="stratum_tokens", label="Stratum (tokens)")
    task_correct = django_filters.BooleanFilter(label="Correct")

    sort = sort_filter(
        task="task__external_id", stratum="stratum_tokens", repeat="repeat", input="input_tokens"
    )

    class Meta:
        model = Trial
        fields = ["family", "task", "stratum", "task_correct"]


class OperatingLimitFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=LimitStatus.choices, empty_label="Any status")
    # A number, not Meta's default model choice: its choices would list every workspace's sweeps.
    qualification = django_filters.NumberFilter(field_name="qualification_id", label="Sweep #")
    model = django_filters.CharFilter(
        field_name="qualification__configuration__model_name",
        lookup_expr="icontains",
        label="Model",
    )

    sort = sort_filter(created="created_at", name="name", status="status", approved="approved_at")

    class Meta:
        model = OperatingLimit
        fields = ["status", "model", "qualification"]


class AssemblyAuditFilter(django_filters.FilterSet):
    verdict = django_filters.ChoiceFilter(
        choices=[("within", "within"), ("over", "over")], empty_label="Any verdict"
    )
    stage = django_filters.CharFilter(label="Stage")
    operating_limit = django_filters.NumberFilter(label="Limit #")
    run_ref = django_filters.CharFilter(lookup_expr="icontains", label="Run")

    sort = sort_filter(created="created_at", total="total", verdict="verdict")

    class Meta:
        model = AssemblyAudit
        fields = ["verdict", "stage", "operating_limit", "run_ref"]
