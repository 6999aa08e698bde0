"""The utility audit (seed 001 §6): sampled runs as judge packets, their steps, and judgments.

A packet is stored whole (zstd-compressed JSON, as call text is) with its inventory's token
sizes beside it, so that fractions are computed without opening packets. A step belongs to a
packet; a judgment names items of the step's packet by number.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from governance.models import WorkspaceOwned
from traces.annotations.analysis.classes import CONFIDENCES
from traces.audit.analysis.fractions import COUNTERFACTUALS
from traces.models import Run


class AuditStatus(models.TextChoices):
    BUILDING = "building", "building packets"
    OPEN = "open"
    CLOSED = "closed"
    FAILED = "failed"


class Audit(WorkspaceOwned):
    """A stratified sample of steps to judge, with the sizes, seed and filter that drew it."""

    name = models.CharField(max_length=200)
    strata_sizes = models.JSONField(
        default=dict,
        help_text="Steps asked for per stratum: {'task_type|band': n}; the band is that of "
        "the step's own window.",
    )
    band_edges = models.JSONField(default=list, help_text="Token edges of the context bands.")
    seed = models.PositiveBigIntegerField(help_text="Random seed of the sample (reproducible).")
    exclude_forks = models.BooleanField(
        default=True,
        help_text="Agents that started as forks of a loaded parent were left out of the sample.",
    )
    status = models.CharField(
        max_length=12, choices=AuditStatus.choices, default=AuditStatus.BUILDING
    )
    job = models.ForeignKey(
        "governance.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    packet_count = models.PositiveIntegerField(default=0)
    step_count = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=AuditStatus.values), name="audit_known_status"
            )
        ]

    def __str__(self) -> str:
        return self.name


class AuditPacket(models.Model):
    """The judge packet of one sampled run."""

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="packets")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    task_type = models.CharField(max_length=24)
    band = models.CharField(max_length=32, help_text="Band of the run's median window.")
    item_count = models.PositiveIntegerField(default=0)
    item_tokens = models.JSONField(default=list, help_text="Tokens of items 1…n, in order.")
    data = models.BinaryField(help_text="The whole packet: zstd-compressed JSON.")

    class Meta:
        ordering = ["audit_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "run"], name="audit_packet_unique_run"),
            models.UniqueConstraint(
                fields=["audit", "position"], name="audit_packet_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"packet {self.position} of {self.audit}"


class AuditStep(models.Model):
    """A sampled step: a call of the packet's run, and what the agent had before it."""

    packet = models.ForeignKey(AuditPacket, on_delete=models.CASCADE, related_name="steps")
    number = models.PositiveSmallIntegerField(help_text="1-based within the packet.")
    call_index = models.PositiveIntegerField()
    window_tokens = models.PositiveBigIntegerField()
    band = models.CharField(max_length=32, help_text="Band of the step's own window.")
    had_through_item = models.PositiveIntegerField(
        help_text="The step had inventory items 1 to this."
    )

    class Meta:
        ordering = ["packet_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["packet", "number"], name="audit_step_unique_number")
        ]

    def __str__(self) -> str:
        return f"step {self.number} of {self.packet}"


class JudgeKind(models.TextChoices):
    HUMAN = "human"
    LLM = "llm", "LLM judge"


class Judgment(WorkspaceOwned):
    """One judge's answer on one step. Judging the same step again replaces the answer."""

    step = models.ForeignKey(AuditStep, on_delete=models.CASCADE, related_name="judgments")
    judge_kind = models.CharField(max_length=8, choices=JudgeKind.choices)
    judge_label = models.CharField(
        max_length=200, help_text="The person's username, or the LLM judge's name and version."
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The person who judged, or who posted the LLM judge's answer.",
    )
    active_item_ids = models.JSONField(default=list)
    helpful_item_ids = models.JSONField(default=list)
    verbatim_needed = models.BooleanField()
    counterfactual = models.CharField(max_length=24, choices=list(COUNTERFACTUALS.items()))
    confidence = models.CharField(max_length=8, choices=list(CONFIDENCES.items()))
    note = models.TextField(blank=True, max_length=5000)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["step", "judge_kind", "judge_label"], name="judgment_one_per_judge"
            ),
            models.CheckConstraint(
                condition=Q(counterfactual__in=list(COUNTERFACTUALS)),
                name="judgment_known_counterfactual",
            ),
            models.CheckConstraint(
                condition=Q(confidence__in=list(CONFIDENCES)), name="judgment_known_confidence"
            ),
            models.CheckConstraint(
                condition=Q(judge_kind__in=JudgeKind.values), name="judgment_known_kind"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge_label} on {self.step}: {self.counterfactual}"
