"""Divergence marks (first consequential divergence of a run) and annotation queues.

A mark names a call by `call_index` (its session_index) rather than a foreign key, because
calls are the table that grows with traffic and may be partitioned by time; the run, agent and
session it belongs to are foreign keys. Replacing a mark keeps the old row (`replaced_at`,
linked from the new one by `replaces`), so the history of a judgement survives.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from governance.models import WorkspaceOwned
from traces.annotations.analysis.classes import CONFIDENCES, FAILURE_CLASSES, OTHER
from traces.models import Agent, Run, Session

FAILURE_CLASS_CHOICES = [(slug, label) for slug, (label, _) in FAILURE_CLASSES.items()]
CONFIDENCE_CHOICES = list(CONFIDENCES.items())


class MarkKind(models.TextChoices):
    MARK = "mark"
    ADJUDICATION = "adjudication", "final (adjudicated)"


class Divergence(WorkspaceOwned):
    """One annotator's first-divergence mark on a run, or an admin's final (adjudicated) mark."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="divergences")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=MarkKind.choices, default=MarkKind.MARK)
    call_index = models.PositiveIntegerField(help_text="Session index of the divergent call.")
    agent_index = models.PositiveIntegerField()
    failure_class = models.CharField(max_length=40, choices=FAILURE_CLASS_CHOICES)
    other_text = models.CharField(
        max_length=500, blank=True, help_text="What 'other' means here (required for other)."
    )
    note = models.TextField(blank=True, max_length=5000)
    evidence_call_indexes = models.JSONField(
        default=list, blank=True, help_text="Session indexes of earlier calls that show why."
    )
    confidence = models.CharField(max_length=8, choices=CONFIDENCE_CHOICES)
    context_tokens = models.PositiveBigIntegerField(
        help_text="The call's context size, stored when the mark is made."
    )
    model = models.CharField(max_length=200, blank=True, help_text="The call's model.")
    based_on = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="For a final mark: the annotator's mark it adopted.",
    )
    replaces = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replaced_by"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    replaced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "annotator"],
                condition=Q(kind="mark", replaced_at__isnull=True),
                name="divergence_one_current_mark_per_annotator",
            ),
            models.UniqueConstraint(
                fields=["run"],
                condition=Q(kind="adjudication", replaced_at__isnull=True),
                name="divergence_one_current_final_mark",
            ),
            models.CheckConstraint(
                condition=Q(failure_class__in=list(FAILURE_CLASSES)),
                name="divergence_known_class",
            ),
            models.CheckConstraint(
                condition=Q(confidence__in=list(CONFIDENCES)), name="divergence_known_confidence"
            ),
            models.CheckConstraint(
                condition=~Q(failure_class=OTHER) | ~Q(other_text=""),
                name="divergence_other_needs_text",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=MarkKind.values), name="divergence_known_kind"
            ),
        ]
        indexes = [
            models.Index(fields=["session", "call_index"]),
            models.Index(fields=["workspace", "replaced_at", "kind"]),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} at call {self.call_index}: {self.failure_class}"

    @property
    def is_current(self) -> bool:
        return self.replaced_at is None

    @property
    def class_label(self) -> str:
        if self.failure_class == OTHER and self.other_text:
            return f"Other: {self.other_text}"
        return self.get_failure_class_display()


class QueueStatus(models.TextChoices):
    OPEN = "open"
    CLOSED = "closed"


class AnnotationQueue(WorkspaceOwned):
    """Runs sampled from a filter, each to be marked by `annotators_per_run` annotators."""

    name = models.CharField(max_length=200)
    criteria = models.JSONField(default=dict, help_text="The run filter the sample came from.")
    matched_runs = models.PositiveIntegerField(help_text="Runs that matched when it was built.")
    sample_size = models.PositiveIntegerField()
    seed = models.PositiveBigIntegerField(help_text="Random seed of the sample (reproducible).")
    annotators_per_run = models.PositiveSmallIntegerField(default=2)
    agreement_window = models.PositiveSmallIntegerField(
        default=3, help_text="Marks within ±N steps count as the same step."
    )
    status = models.CharField(max_length=8, choices=QueueStatus.choices, default=QueueStatus.OPEN)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    annotators = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="QueueAnnotator", related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(annotators_per_run__gte=1) & Q(annotators_per_run__lte=10),
                name="queue_annotators_per_run_range",
            ),
            models.CheckConstraint(
                condition=Q(agreement_window__lte=1000), name="queue_window_range"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class QueueAnnotator(models.Model):
    """Who may take runs from a queue. Its row is locked while that person is given a run, so
    one person's concurrent requests are served one at a time."""

    queue = models.ForeignKey(AnnotationQueue, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["queue", "user"], name="queue_annotator_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} on {self.queue}"


class QueueItem(models.Model):
    queue = models.ForeignKey(AnnotationQueue, on_delete=models.CASCADE, related_name="items")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["queue_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "run"], name="queue_item_unique_run"),
            models.UniqueConstraint(
                fields=["queue", "position"], name="queue_item_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queue} #{self.position}"


class SlotOutcome(models.TextChoices):
    MARKED = "marked"
    NO_DIVERGENCE = "no_divergence", "no divergence"


class QueueSlot(models.Model):
    """One of an item's `annotators_per_run` places. Claimed under a row lock (skip locked), so
    a place is never given to two people; one person never holds two places of one item."""

    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="slots")
    number = models.PositiveSmallIntegerField()
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    assigned_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=SlotOutcome.choices, blank=True)

    class Meta:
        ordering = ["item_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["item", "number"], name="queue_slot_unique_number"),
            models.UniqueConstraint(fields=["item", "annotator"], name="queue_slot_one_per_person"),
        ]
        indexes = [models.Index(fields=["annotator", "finished_at"])]

    def __str__(self) -> str:
        return f"slot {self.number} of {self.item}"


class QueueSkip(models.Model):
    """An annotator passed on a run; it is not offered to them again."""

    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="skips")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "user"], name="queue_skip_unique")]

    def __str__(self) -> str:
        return f"{self.user} skipped {self.item}"
