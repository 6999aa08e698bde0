"""OpenTelemetry logs and metrics as stored, and the workspace's telemetry policy."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from governance.models import Workspace, WorkspaceOwned
from traces.models.sessions import Call, Session
from traces.models.uploads import RawUpload


class IdentityHandling(models.TextChoices):
    KEEP = "keep", "keep as sent"
    HASH = "hash", "replace with a keyed hash"
    DROP = "drop", "drop"


def _new_identity_key() -> str:
    import secrets

    return secrets.token_hex(32)


class TelemetryPolicy(WorkspaceOwned):
    """How OTLP telemetry is stored in a workspace; one per workspace, admins edit it."""

    identity = models.CharField(
        max_length=8,
        choices=IdentityHandling.choices,
        default=IdentityHandling.HASH,
        help_text="What happens to user.email, user.account_uuid, user.account_id, user.id and "
        "organization.id before anything (the raw request included) is stored.",
    )
    identity_key = models.CharField(
        max_length=64,
        default=_new_identity_key,
        editable=False,
        help_text="The workspace's secret key for the keyed hash (HMAC-SHA256).",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace"], name="telemetry_policy_one_per_workspace")
        ]

    def __str__(self) -> str:
        return f"telemetry policy ({self.identity})"


class TelemetryEvent(WorkspaceOwned):
    """One OTLP log event (Claude Code `claude_code.*`, Codex `codex.*`, or any other name,
    kept with `recognised` false). Token columns follow the Call split (`input_tokens` is
    uncached input); null means the event did not carry that count."""

    # As for Call: only the session link is checked by the database.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="telemetry_events", db_index=False
    )
    upload = models.ForeignKey(
        RawUpload,
        null=True,
        on_delete=models.SET_NULL,
        db_constraint=False,
        db_index=False,
        related_name="+",
        help_text="The OTLP request it arrived in.",
    )
    call = models.ForeignKey(
        Call,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_constraint=False,
        db_index=False,
        related_name="+",
        help_text="The call with the same request id in the same session, linked on arrival "
        "or when the call arrives.",
    )
    key = models.CharField(max_length=32, help_text="Digest of name, time and attributes.")
    name = models.CharField(max_length=100)
    recognised = models.BooleanField(default=True)
    timestamp = models.DateTimeField()
    prompt_id = models.CharField(max_length=64, blank=True)
    request_id = models.CharField(max_length=200, blank=True)
    app_version = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)
    query_source = models.CharField(max_length=100, blank=True)
    agent_name = models.CharField(max_length=200, blank=True)
    input_tokens = models.BigIntegerField(null=True, blank=True, help_text="Uncached input.")
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cache_read_tokens = models.BigIntegerField(null=True, blank=True)
    cache_creation_tokens = models.BigIntegerField(null=True, blank=True)
    reasoning_tokens = models.BigIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=8, null=True, blank=True)
    duration_ms = models.BigIntegerField(null=True, blank=True)
    attributes = models.JSONField(default=dict, help_text="The record's attributes, redacted.")

    class Meta:
        ordering = ["session_id", "timestamp", "id"]
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="telemetry_event_unique_key"),
        ]
        indexes = [
            # The join: an event by request id within a session.
            models.Index(
                fields=["session", "request_id"],
                name="telemetry_event_request",
                condition=~models.Q(request_id=""),
            ),
            models.Index(fields=["workspace", "name", "timestamp"]),
        ]

    def __str__(self) -> str:
        return f"{self.name} at {self.timestamp:%Y-%m-%d %H:%M:%S}"


class MetricTemporality(models.TextChoices):
    DELTA = "delta"
    CUMULATIVE = "cumulative"


class TelemetryMetricPoint(WorkspaceOwned):
    """One data point of an OTLP Sum metric (e.g. `claude_code.token.usage`), stored as a
    delta: cumulative points become the difference from the previous point of their
    series (the total itself is kept in `cumulative_value`)."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="telemetry_points",
        help_text="Empty when the exporter leaves session.id out of metrics.",
    )
    upload = models.ForeignKey(
        RawUpload,
        null=True,
        on_delete=models.SET_NULL,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    name = models.CharField(max_length=200)
    series_key = models.CharField(
        max_length=32, help_text="Digest of name, scope, resource and point attributes."
    )
    temporality = models.CharField(max_length=10, choices=MetricTemporality.choices)
    start_time_unix_nano = models.BigIntegerField(default=0)
    time_unix_nano = models.BigIntegerField()
    timestamp = models.DateTimeField()
    value = models.FloatField(help_text="Increase over the point's interval.")
    cumulative_value = models.FloatField(null=True, blank=True)
    type = models.CharField(max_length=32, blank=True, help_text="token.usage: input, output, …")
    model = models.CharField(max_length=200, blank=True)
    query_source = models.CharField(max_length=100, blank=True)
    attributes = models.JSONField(default=dict)

    class Meta:
        ordering = ["name", "series_key", "time_unix_nano"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "series_key", "time_unix_nano"],
                name="telemetry_point_unique_time",
            )
        ]
        indexes = [models.Index(fields=["workspace", "name", "timestamp"])]

    def __str__(self) -> str:
        return f"{self.name} {self.value} at {self.timestamp:%Y-%m-%d %H:%M:%S}"
