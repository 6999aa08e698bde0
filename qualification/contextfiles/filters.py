"""FilterSets shared by the ledger page and the instructions API."""

import django_filters
from django.db.models import Q
from django.utils import timezone

from qualification.contextfiles.models import CategoryChoices, Instruction


class InstructionFilter(django_filters.FilterSet):
    context_file = django_filters.NumberFilter(field_name="revision__context_file")
    revision = django_filters.NumberFilter(
        field_name="revision__number", help_text="Revision number (use with context_file)."
    )
    category = django_filters.ChoiceFilter(
        choices=CategoryChoices.choices, empty_label="Any category"
    )
    change = django_filters.ChoiceFilter(
        choices=Instruction.Change.choices, empty_label="Any change"
    )
    flagged = django_filters.BooleanFilter(
        method="filter_flagged",
        label="Flagged only",
        help_text="No owner, no reason, or past its review date.",
    )

    class Meta:
        model = Instruction
        fields = ["context_file", "revision", "category", "change", "flagged"]

    def filter_flagged(self, queryset, name, value):
        if value is None:
            return queryset
        today = timezone.localdate()
        flagged = (
            Q(owner="")
            | Q(reason="")
            | Q(review_due_on__lt=today)
            | Q(review_due_on__isnull=True, last_reviewed_on__isnull=False)
        )
        ids = [
            i.pk
            for i in queryset.filter(flagged).select_related("revision__context_file")
            if set(i.flags(today)) - {"never reviewed"}
        ]
        return queryset.filter(pk__in=ids) if value else queryset.exclude(pk__in=ids)
