"""Core models: workspaces and roles, API tokens, background jobs and the audit log."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.IntegerChoices):
    """Ordered roles: each includes everything the ones below it may do."""

    VIEWER = 10, "viewer"
    EDITOR = 20, "editor"
    REVIEWER = 30, "reviewer"
    ADMIN = 40, "admin"

    @classmethod
    def from_name(cls, name: str) -> Role:
        for role in cls:
            if role.label == name.strip().lower():
                return role
        names = ", ".join(role.label for role in cls)
        raise ValueError(f"unknown role {name!r}; choose one of {names}")


class Workspace(models.Model):
    slug = models.SlugField(unique=True, max_length=64)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    data_version = models.PositiveBigIntegerField(
        default=0, help_text="Bumped whenever trace data changes; keys analytics caches."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class WorkspaceQuerySet(models.QuerySet):
    def for_workspace(self, workspace: Workspace):
        return self.filter(workspace=workspace)


class WorkspaceOwned(models.Model):
    """Base for every domain object: it belongs to exactly one workspace."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")

    objects = WorkspaceQuerySet.as_manager()

    class Meta:
        abstract = True


class Membership(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.PositiveSmallIntegerField(choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="unique_membership"),
            models.CheckConstraint(condition=models.Q(role__in=Role.values), name="valid_role"),
        ]
        ordering = ["workspace__name", "-role", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} as {self.get_role_display()}"

    def has_role(self, required: int) -> bool:
        return self.role >= required


class ApiToken(models.Model):
    """A bearer token for one user in one workspace. Only its sha256 is stored."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_tokens")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, help_text="Shown to identify the token; not secret.")
    token_hash = models.CharField(max_length=64, unique=True)
    run_id = models.CharField(
        max_length=200,
        blank=True,
        help_text="If set, the token may read only this run's artifacts.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user} in {self.workspace})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @classmethod
    def finished(cls) -> set[str]:
        return {cls.SUCCEEDED, cls.FAILED}


# A job that ends with nothing to show for it fails with a message that starts so; its
# badge then says "no data" rather than a bare "failed".
JOB_NO_DATA_PREFIX = "No data:"


class Job(WorkspaceOwned):
    """A background job with visible progress, counts and line-numbered errors."""

    kind = models.CharField(max_length=64)
    label = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    progress_done = models.PositiveBigIntegerField(default=0)
    progress_total = models.PositiveBigIntegerField(null=True, blank=True)
    progress_unit = models.CharField(max_length=32, blank=True, default="items")
    params = models.JSONField(default=dict, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(
        default=list, blank=True, help_text="Input errors: [{file, line, error}], capped."
    )
    error_count = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Why the job failed, if it did.")
    attempts = models.PositiveSmallIntegerField(default=0, help_text="How many times it started.")
    attempt_log = models.JSONField(
        default=list,
        blank=True,
        help_text="Attempts that stopped before the job finished: [{attempt, at, outcome}].",
    )
    task_name = models.CharField(
        max_length=200,
        blank=True,
        help_text="The Celery task that runs it (sent again on requeue).",
    )
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life from the process running it."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "kind", "-created_at"]),
            # The stale-job sweep reads only running jobs, every minute.
            models.Index(
                fields=["heartbeat_at"],
                condition=models.Q(status=JobStatus.RUNNING),
                name="job_running_heartbeat",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.status})"

    @property
    def silent_since(self):
        """When a running job last showed signs of life, if that is longer ago than the
        stale-job sweep allows (its worker is probably gone); else None."""
        if self.status != JobStatus.RUNNING:
            return None
        last_seen = self.heartbeat_at or self.started_at
        stale_after = timedelta(seconds=settings.GOVERNANCE_JOB_STALE_SECONDS)
        if last_seen is None or timezone.now() - last_seen < stale_after:
            return None
        return last_seen

    @property
    def is_finished(self) -> bool:
        return self.status in JobStatus.finished()

    @property
    def status_label(self) -> str:
        if self.status == JobStatus.FAILED and self.error.startswith(JOB_NO_DATA_PREFIX):
            return "no data"
        return self.status

    @property
    def duration(self) -> timedelta | None:
        """Finished minus started; for a running job, the time it has run so far."""
        if self.started_at is None:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    @property
    def percent(self) -> int | None:
        if not self.progress_total:
            return 100 if self.status == JobStatus.SUCCEEDED else None
        return min(100, int(100 * self.progress_done / self.progress_total))


class AuditEvent(WorkspaceOwned):
    """Who did what to which object, and when. Written by services, never edited."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=100)
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=300, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.object_type}:{self.object_id}"


class InvitationStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    REVOKED = "revoked"


class Invitation(WorkspaceOwned):
    """An admin's offer of a role to whoever signs in as `invitee` (a username or an e-mail
    address). Only the invitee's acceptance creates the membership."""

    LIFETIME = timedelta(days=14)

    invitee = models.CharField(
        max_length=254, help_text="A username, or an e-mail address (kept in lower case)."
    )
    role = models.PositiveSmallIntegerField(choices=Role.choices)
    status = models.CharField(
        max_length=16, choices=InvitationStatus.choices, default=InvitationStatus.PENDING
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    answered_at = models.DateTimeField(null=True, blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who accepted, declined or revoked it.",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "invitee"],
                condition=models.Q(status="pending"),
                name="one_pending_invitation",
            ),
            models.CheckConstraint(
                condition=models.Q(role__in=Role.values), name="invitation_valid_role"
            ),
        ]
        indexes = [models.Index(fields=["invitee", "status"])]

    def __str__(self) -> str:
        return f"{self.invitee} to {self.workspace} as {self.get_role_display()}"

    @property
    def is_expired(self) -> bool:
        return self.status == InvitationStatus.PENDING and self.expires_at <= timezone.now()

    @property
    def state_label(self) -> str:
        return "expired" if self.is_expired else self.status
