"""Cached analytics results, one per workspace and filter set, tagged with the data version."""

from django.db import models

from governance.models import WorkspaceOwned


class AnalyticsResult(WorkspaceOwned):
    filter_key = models.CharField(max_length=64, help_text="sha256 of the canonical filters.")
    filters = models.JSONField(default=dict)
    data_version = models.PositiveBigIntegerField()
    result = models.JSONField(default=dict)
    computed_at = models.DateTimeField(auto_now=True)
    seconds = models.FloatField(default=0)
    job = models.ForeignKey(
        "governance.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "filter_key"], name="analytics_unique_filters"
            )
        ]

    def __str__(self) -> str:
        return f"analytics {self.filter_key[:8]} v{self.data_version}"
