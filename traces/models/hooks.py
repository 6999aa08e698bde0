"""Harness hook events and the workspace's hook policy."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from governance.models import WorkspaceOwned
from traces.models.sessions import Compaction, Session
from traces.models.uploads import Harness


class HookEvent(WorkspaceOwned):
    """One harness hook call as `context-governance hook …` sent it: the raw payload, kept
    with its session id, event name and times. Resent events (from the client's spool) are
    recognised by `event_id` and stored once."""

    event_id = models.CharField(max_length=64, help_text="The client's id for the event.")
    harness = models.CharField(max_length=16, choices=Harness.choices)
    event = models.CharField(max_length=40, help_text="e.g. SessionStart, PreCompact.")
    session_external_id = models.CharField(max_length=200, blank=True)
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="hook_events"
    )
    compaction = models.ForeignKey(
        Compaction, null=True, blank=True, on_delete=models.SET_NULL, related_name="hook_events"
    )
    trigger = models.CharField(max_length=16, blank=True)
    context_tokens = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The window when the hook ran, read by the client."
    )
    payload = models.JSONField(help_text="The hook's stdin, as the harness sent it.")
    occurred_at = models.DateTimeField(help_text="When the hook ran, by the client's clock.")
    received_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-occurred_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "event_id"], name="hook_event_unique_event_id"
            )
        ]
        indexes = [
            models.Index(
                fields=["workspace", "session_external_id", "occurred_at"],
                name="hook_event_session_time",
            )
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.session_external_id}"


class PreCompactAction(models.TextChoices):
    OFF = "off", "off: let the compaction happen, say nothing"
    SUGGEST = "suggest", "suggest a restart from the authoritative specification"
    BLOCK = "block", "block the automatic compaction and suggest a restart"


class HookPolicy(WorkspaceOwned):
    """What `context-governance hook …` answers the harness in a workspace; one per
    workspace, admins edit it. The server decides; the command prints the answer."""

    pre_compact_action = models.CharField(
        max_length=8,
        choices=PreCompactAction.choices,
        default=PreCompactAction.SUGGEST,
        help_text="At PreCompact, when the context is above the qualified ECL of the session's "
        "model.",
    )
    session_start_context = models.BooleanField(
        default=True,
        help_text="At SessionStart, give the agent the operating limit and the key of the "
        "authoritative specification as additional context.",
    )
    spec = models.ForeignKey(
        "specs.Spec",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The specification whose authoritative version sessions restart from.",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace"], name="hook_policy_one_per_workspace"),
            models.CheckConstraint(
                condition=models.Q(pre_compact_action__in=PreCompactAction.values),
                name="hook_policy_valid_pre_compact_action",
            ),
        ]

    def __str__(self) -> str:
        return f"hook policy ({self.pre_compact_action})"
