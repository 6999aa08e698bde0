"""Raw uploads, the files ingested from them, followed files and their job links."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from governance.models import WorkspaceOwned


class Harness(models.TextChoices):
    CLAUDE_CODE = "claude-code", "Claude Code"
    CODEX = "codex", "Codex CLI"
    OTLP = "otlp", "OpenTelemetry"


class UploadSource(models.TextChoices):
    WEB = "web"
    API = "api"
    CLI = "cli"
    OTLP = "otlp"
    DEMO = "demo"


def raw_upload_path(instance, filename):
    # Server-generated name: never a client-supplied path.
    return f"raw/{instance.workspace_id}/{instance.sha256[:2]}/{instance.sha256}"


class RawUpload(WorkspaceOwned):
    """An uploaded file exactly as received, kept as evidence. The same bytes are stored once."""

    sha256 = models.CharField(max_length=64)
    original_name = models.CharField(max_length=500)
    size = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=100, blank=True)
    file = models.FileField(upload_to=raw_upload_path, max_length=300)
    source = models.CharField(max_length=8, choices=UploadSource.choices)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    job = models.ForeignKey(
        "governance.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "sha256"], name="raw_upload_unique_bytes")
        ]

    def __str__(self) -> str:
        return f"{self.original_name} ({self.sha256[:12]})"


class IngestedFile(WorkspaceOwned):
    """One transcript file (or archive member) that was parsed, with what it yielded."""

    upload = models.ForeignKey(RawUpload, on_delete=models.CASCADE, related_name="files")
    member = models.CharField(
        max_length=1000, help_text="Path inside the archive, or the file name."
    )
    sha256 = models.CharField(max_length=64)
    harness = models.CharField(max_length=16, choices=Harness.choices, blank=True)
    lines = models.PositiveIntegerField(default=0)
    calls = models.PositiveIntegerField(default=0)
    duplicates_dropped = models.PositiveIntegerField(default=0)
    malformed_lines = models.PositiveIntegerField(default=0)
    complete = models.BooleanField(
        default=True,
        help_text="False while its calls are being loaded: a file whose load was cut off "
        "is read again.",
    )
    size = models.PositiveBigIntegerField(default=0, help_text="Bytes of the file or member.")
    start_offset = models.PositiveBigIntegerField(
        default=0, help_text="Where parsing started: the size of the file it grew from."
    )
    grown_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    parser_state = models.JSONField(
        null=True, blank=True, help_text="What the parser needs to go on reading if the file grows."
    )
    sessions = models.ManyToManyField(
        "Session",
        blank=True,
        related_name="ingested_files",
        help_text="The sessions this file held calls of.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "sha256"], name="ingested_file_unique_bytes"
            )
        ]

    def __str__(self) -> str:
        return self.member


class FollowedFile(WorkspaceOwned):
    """A transcript file that `ingest_traces --follow` reads as it grows: how far it was
    read, and what it began with, so that a restart goes on from there and a truncated or
    replaced file is read again from the start."""

    path = models.CharField(max_length=1000, help_text="Absolute path on the host that follows it.")
    harness = models.CharField(max_length=16, choices=Harness.choices, blank=True)
    offset = models.PositiveBigIntegerField(
        default=0, help_text="Bytes read: the end of the last complete line ingested."
    )
    head_sha256 = models.CharField(
        max_length=64, blank=True, help_text="sha256 of the file's first `head_size` bytes."
    )
    head_size = models.PositiveIntegerField(default=0)
    device = models.PositiveBigIntegerField(default=0)
    inode = models.PositiveBigIntegerField(default=0)
    parser_state = models.JSONField(
        null=True, blank=True, help_text="What the parser needs to go on from `offset`."
    )
    lines = models.PositiveIntegerField(default=0, help_text="Lines read since the last reset.")
    resets = models.PositiveIntegerField(
        default=0, help_text="Times the file was found truncated or replaced and read again."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "path"], name="followed_file_unique_path")
        ]

    def __str__(self) -> str:
        return self.path


class JobFile(models.Model):
    """A file an ingest job read, or found already ingested (the same bytes uploaded
    again): how a job reaches the files, and through them the sessions, it brought in."""

    job = models.ForeignKey("governance.Job", on_delete=models.CASCADE, related_name="+")
    file = models.ForeignKey(IngestedFile, on_delete=models.CASCADE, related_name="job_links")
    read = models.BooleanField(
        default=True, help_text="False: the file was already ingested, so the job skipped it."
    )

    class Meta:
        ordering = ["job_id", "id"]
        constraints = [models.UniqueConstraint(fields=["job", "file"], name="job_file_unique")]

    def __str__(self) -> str:
        return f"job {self.job_id}: file {self.file_id}"
