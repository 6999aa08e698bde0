"""Cached analytics results, one per workspace and filter set, tagged with the data version."""

from django.conf import settings
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


class CorrectionPhraseList(WorkspaceOwned):
    """One version of the workspace's correction phrases (behaviour after compaction).

    Each save is a new row with the next version; the list shipped in
    `traces.analysis.post_compaction.DEFAULT_PHRASES` is version 1 until one is saved."""

    version = models.PositiveIntegerField()
    phrases = models.JSONField(default=list)
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "version"], name="correction_phrases_unique_version"
            )
        ]

    def __str__(self) -> str:
        return f"correction phrases v{self.version}"


class InstructionVisibilityRun(WorkspaceOwned):
    """One instruction-visibility count run as a job (workspaces past the on-request
    limit): what was asked, the job that counts it, and its result once done."""

    instruction = models.TextField(
        blank=True, help_text="Free text looked for ('' for a ledger one)."
    )
    ledger_instruction = models.ForeignKey(
        "contextfiles.Instruction",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    delivery = models.CharField(max_length=32)
    filters = models.JSONField(default=dict)
    job = models.ForeignKey(
        "governance.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    result = models.JSONField(null=True, blank=True)
    seconds = models.FloatField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"instruction visibility run {self.pk}"


class CallTextExtract(models.Model):
    """A call's text as instruction visibility matches it in the database (seed 000): its
    visible thinking blocks joined by newlines, as stored and normalised
    (`traces.analysis.instruction_visibility.normalise`), and the normalised texts that can
    deliver an instruction (prompt and compaction summary; tool results), so that matching
    is `strpos`. A derived, disposable cache written by the job queued after the derive step
    (`instruction_visibility_extracts`) and by the counting job, never by a request;
    `source_bytes` (the stored text's length) marks a row stale when the call's text
    changes, `version` when the normalisation does (another Unicode version)."""

    call = models.OneToOneField(
        "traces.Call",
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
    )
    source_bytes = models.PositiveIntegerField()
    version = models.BigIntegerField()
    thinking = models.TextField(blank=True)
    thinking_normalised = models.TextField(blank=True)
    thinking_blocks = models.PositiveIntegerField(default=0)
    # Each text normalised, joined by newlines (a normalised text has none, so no match
    # spans two texts).
    prompt_normalised = models.TextField(blank=True)
    result_normalised = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"text extract of call {self.call_id}"
