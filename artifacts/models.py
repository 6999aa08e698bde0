"""Artifacts: bulk tool output kept outside the context window, behind costed pointers.

An `Artifact` row is the pointer and, once its content is gone, the tombstone. Its content
lives in Django storage under a server-generated name. `ArtifactRead` records which portions
each reader loaded; `ArtifactWriteFailure` keeps failed writes visible; `ArtifactPolicy`
holds a workspace's limits, retention and redaction rules.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from artifacts.content.redaction import DEFAULT_RULES, RedactionRule, Redactor
from governance.models import ApiToken, WorkspaceOwned

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


class ArtifactPolicy(WorkspaceOwned):
    """One per workspace, created with these defaults on first use; admins edit it."""

    retention_days = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text="Days an artifact's content is kept before it expires and is purged.",
    )
    max_artifact_bytes = models.PositiveBigIntegerField(
        default=2 * GIB,
        validators=[MinValueValidator(1), MaxValueValidator(64 * GIB)],
        help_text="Largest artifact a write may store; a larger body is refused (413).",
    )
    max_read_lines = models.PositiveIntegerField(
        default=2000,
        validators=[MinValueValidator(1), MaxValueValidator(1_000_000)],
        help_text="Most lines one tail, head or range read may return.",
    )
    max_read_bytes = models.PositiveIntegerField(
        default=512 * KIB,
        validators=[MinValueValidator(1 * KIB), MaxValueValidator(256 * MIB)],
        help_text="Most bytes one tail, head, range or search read may return (the inline limit).",
    )
    max_search_matches = models.PositiveIntegerField(
        default=200,
        validators=[MinValueValidator(1), MaxValueValidator(100_000)],
        help_text="Most matches one search may return.",
    )
    max_search_context = models.PositiveIntegerField(
        default=20,
        validators=[MaxValueValidator(1000)],
        help_text="Most context lines a search may ask for on each side of a match.",
    )
    search_timeout_ms = models.PositiveIntegerField(
        default=2000,
        validators=[MinValueValidator(50), MaxValueValidator(60_000)],
        help_text="A regex search that runs longer than this is stopped (400).",
    )
    max_content_bytes = models.PositiveBigIntegerField(
        default=64 * MIB,
        validators=[MinValueValidator(1), MaxValueValidator(64 * GIB)],
        help_text="Largest artifact the full-load (content) read will return.",
    )
    disabled_rules = models.JSONField(
        default=list, blank=True, help_text="Names of built-in redaction rules turned off."
    )
    custom_rules = models.JSONField(
        default=list, blank=True, help_text='Extra redaction rules: [{"name", "pattern"}].'
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace"], name="artifact_policy_one_per_workspace"),
            models.CheckConstraint(
                condition=Q(retention_days__gte=1), name="artifact_policy_retention_positive"
            ),
        ]
        verbose_name_plural = "artifact policies"

    def __str__(self) -> str:
        return f"Artifact policy for {self.workspace}"

    def redaction_rules(self) -> list[RedactionRule]:
        disabled = set(self.disabled_rules or [])
        rules = [rule for rule in DEFAULT_RULES if rule.name not in disabled]
        rules += [
            RedactionRule(rule["name"], rule["pattern"], rule.get("description", ""))
            for rule in self.custom_rules or []
        ]
        return rules

    def redactor(self) -> Redactor:
        return Redactor(self.redaction_rules())


class ArtifactState(models.TextChoices):
    AVAILABLE = "available"
    EXPIRED = "expired"
    DELETED = "deleted"


class Artifact(WorkspaceOwned):
    """The pointer: what ran, when, how it ended, and what loading it would cost."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run_id = models.CharField(max_length=200)
    tool_call_id = models.CharField(max_length=200, blank=True)
    command = models.TextField(help_text="Command or tool name, redacted like the content.")
    exit_status = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    complete = models.BooleanField(default=True, help_text="False when the output was truncated.")
    dropped_bytes = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Bytes the writer dropped before sending, if it says."
    )
    dropped_lines = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Lines the writer dropped before sending, if it says."
    )
    size_bytes = models.PositiveBigIntegerField()
    line_count = models.PositiveBigIntegerField()
    estimated_tokens = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64, help_text="Fingerprint of the stored bytes.")
    redaction_count = models.PositiveIntegerField(default=0)
    redactions_by_rule = models.JSONField(default=dict, blank=True)
    storage_name = models.CharField(max_length=300, unique=True, editable=False)
    line_index = models.BinaryField(editable=False)
    state = models.CharField(
        max_length=16, choices=ArtifactState.choices, default=ArtifactState.AVAILABLE
    )
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_token = models.ForeignKey(
        ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    gone_at = models.DateTimeField(
        null=True, blank=True, help_text="When it expired or was deleted."
    )
    deleted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    delete_reason = models.CharField(max_length=500, blank=True)
    purged_at = models.DateTimeField(
        null=True, blank=True, help_text="When the content was removed from storage."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # A retried write (same run, tool call and bytes) finds the pointer it made before.
            models.UniqueConstraint(
                fields=["workspace", "run_id", "tool_call_id", "sha256"],
                condition=Q(state="available"),
                name="artifact_one_live_copy_per_output",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["available", "expired", "deleted"]),
                name="artifact_valid_state",
            ),
            models.CheckConstraint(
                condition=Q(complete=False)
                | (Q(dropped_bytes__isnull=True) & Q(dropped_lines__isnull=True)),
                name="artifact_dropped_only_when_truncated",
            ),
            models.CheckConstraint(
                condition=Q(state="available") | Q(gone_at__isnull=False),
                name="artifact_gone_has_date",
            ),
        ]
        indexes = [
            models.Index(fields=["workspace", "run_id", "created_at"]),
            models.Index(fields=["workspace", "-created_at"]),
            models.Index(fields=["state", "expires_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.command[:60]} ({self.run_id})"

    @property
    def current_state(self) -> str:
        """The state now: past `expires_at` an artifact is expired, even before the purge
        has marked its row (reads already answer 410 from that moment)."""
        if self.state == ArtifactState.AVAILABLE and self.expires_at <= timezone.now():
            return ArtifactState.EXPIRED
        return self.state

    @property
    def gone_since(self):
        """When it expired or was deleted; None while it is available."""
        if self.gone_at is not None:
            return self.gone_at
        return self.expires_at if self.current_state == ArtifactState.EXPIRED else None

    @property
    def status(self) -> str:
        """available, truncated, expired or deleted: what the list filters on."""
        state = self.current_state
        if state != ArtifactState.AVAILABLE:
            return state
        return "available" if self.complete else "truncated"


class ArtifactReadMode(models.TextChoices):
    TAIL = "tail"
    HEAD = "head"
    RANGE = "range"
    SEARCH = "search"
    CONTENT = "content"


class ArtifactRead(WorkspaceOwned):
    """One read of an artifact's content: who, how, which bytes, how many came back."""

    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="reads")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    token = models.ForeignKey(
        ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    via = models.CharField(max_length=8, help_text="api or page")
    mode = models.CharField(max_length=8, choices=ArtifactReadMode.choices)
    params = models.JSONField(default=dict, blank=True)
    start_line = models.PositiveBigIntegerField(null=True, blank=True)
    end_line = models.PositiveBigIntegerField(null=True, blank=True)
    start_byte = models.PositiveBigIntegerField(null=True, blank=True)
    end_byte = models.PositiveBigIntegerField(null=True, blank=True)
    ranges = models.JSONField(
        default=list, blank=True, help_text="Byte ranges returned, [[start, end), …]."
    )
    bytes_returned = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["artifact", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.mode} of {self.artifact_id}"


class ArtifactWriteFailure(WorkspaceOwned):
    """A write that stored nothing, kept so that failures stay visible."""

    run_id = models.CharField(max_length=200, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    command = models.TextField(blank=True)
    reason = models.TextField()
    bytes_received = models.PositiveBigIntegerField(default=0)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    token = models.ForeignKey(
        ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "-created_at"])]

    def __str__(self) -> str:
        return f"failed write for {self.run_id}: {self.reason[:60]}"
