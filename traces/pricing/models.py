"""A workspace's price table: versions, each holding one price per model.

Every edit makes a new version (the rows are copied, then changed), so a cost figure can name
the version it came from and an old version still says what it charged.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from governance.models import WorkspaceOwned

RATE_HELP = "US dollars per million tokens."


def _rate(label: str) -> models.DecimalField:
    return models.DecimalField(
        label,
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(Decimal(0))],
        help_text=RATE_HELP,
    )


class PriceTableVersion(WorkspaceOwned):
    """One version of the workspace's price table; the highest number is the current one."""

    number = models.PositiveIntegerField()
    note = models.CharField(max_length=500, blank=True, help_text="Why it changed.")
    changes = models.JSONField(
        default=dict, blank=True, help_text="Models added, changed and removed against the last."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "number"], name="price_table_version_unique_number"
            ),
            models.CheckConstraint(
                condition=models.Q(number__gte=1), name="price_table_version_number_from_1"
            ),
        ]

    def __str__(self) -> str:
        return f"price table v{self.number}"


class ModelPrice(WorkspaceOwned):
    """The rates of one model (and its aliases) in one version of the price table."""

    version = models.ForeignKey(PriceTableVersion, on_delete=models.CASCADE, related_name="prices")
    model = models.CharField(
        max_length=200, help_text="Model name as the harness reports it, without a date tag."
    )
    aliases = models.JSONField(
        default=list, blank=True, help_text="Other names of the same model, matched the same way."
    )
    input_rate = _rate("input")
    output_rate = _rate("output")
    cache_read_rate = _rate("cache read")
    cache_write_5m_rate = _rate("5-minute cache write")
    cache_write_1h_rate = _rate("1-hour cache write")
    as_of = models.DateField(help_text="The date these rates were the provider's price.")
    source = models.CharField(max_length=500, help_text="Where the rates come from.")

    class Meta:
        ordering = ["version_id", "model"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "model"], name="model_price_unique_in_version"
            ),
            models.CheckConstraint(
                condition=models.Q(input_rate__gte=0)
                & models.Q(output_rate__gte=0)
                & models.Q(cache_read_rate__gte=0)
                & models.Q(cache_write_5m_rate__gte=0)
                & models.Q(cache_write_1h_rate__gte=0),
                name="model_price_rates_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} (v{self.version.number})" if self.version_id else self.model
