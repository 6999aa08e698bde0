"""Standing context files, their instruction ledger, drift checks, and pre-registered evaluations."""

from __future__ import annotations

from datetime import date, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q

from governance.models import WorkspaceOwned
from qualification.contextfiles.analysis.parsing import CATEGORY_LABELS, Category

DEFAULT_REVIEW_INTERVAL_DAYS = 180


class CategoryChoices(models.TextChoices):
    BUILD_TEST = Category.BUILD_TEST.value, CATEGORY_LABELS[Category.BUILD_TEST]
    FAILURE_PREVENTION = (
        Category.FAILURE_PREVENTION.value,
        CATEGORY_LABELS[Category.FAILURE_PREVENTION],
    )
    ARCHITECTURE = Category.ARCHITECTURE.value, CATEGORY_LABELS[Category.ARCHITECTURE]
    CONVENTION = Category.CONVENTION.value, CATEGORY_LABELS[Category.CONVENTION]
    OTHER = Category.OTHER.value, CATEGORY_LABELS[Category.OTHER]


class ContextFile(WorkspaceOwned):
    """One standing file (AGENTS.md, CLAUDE.md …) at one path of one repository."""

    repository = models.CharField(max_length=300)
    path = models.CharField(max_length=300)
    review_interval_days = models.PositiveIntegerField(
        default=DEFAULT_REVIEW_INTERVAL_DAYS,
        help_text="An instruction with no review date is due this many days after its last review.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["repository", "path"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "repository", "path"], name="unique_context_file"
            )
        ]

    def __str__(self) -> str:
        return f"{self.repository}:{self.path}"


class ContextFileRevision(WorkspaceOwned):
    """The file's text at one revision (a commit or content hash). History is kept."""

    context_file = models.ForeignKey(
        ContextFile, on_delete=models.CASCADE, related_name="revisions"
    )
    number = models.PositiveIntegerField(help_text="1 for the first imported revision, then 2, 3 …")
    revision = models.CharField(max_length=100, help_text="Commit, tag or content hash.")
    content_hash = models.CharField(max_length=64)
    text = models.TextField()
    token_estimate = models.PositiveIntegerField()
    instruction_count = models.PositiveIntegerField(default=0)
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    diff_counts = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["context_file", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["context_file", "number"], name="unique_revision_number"
            ),
            models.UniqueConstraint(
                fields=["context_file", "revision"], name="unique_revision_label"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.context_file} @ {self.revision}"


class Instruction(WorkspaceOwned):
    """One instruction of one revision, with its ledger entry (carried forward on import)."""

    class Change(models.TextChoices):
        ADDED = "added"
        CHANGED = "changed"
        MOVED = "moved"
        UNCHANGED = "unchanged"

    revision = models.ForeignKey(
        ContextFileRevision, on_delete=models.CASCADE, related_name="instructions"
    )
    position = models.PositiveIntegerField()
    section = models.CharField(max_length=500, blank=True)
    kind = models.CharField(max_length=16)
    text = models.TextField()
    line_start = models.PositiveIntegerField()
    line_end = models.PositiveIntegerField()
    token_estimate = models.PositiveIntegerField()
    category = models.CharField(max_length=32, choices=CategoryChoices.choices)
    category_basis = models.CharField(max_length=300, blank=True)
    category_corrected = models.BooleanField(
        default=False, help_text="A person set the category; the guess no longer applies."
    )
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    change = models.CharField(max_length=16, choices=Change.choices, default=Change.ADDED)
    # The ledger
    owner = models.CharField(max_length=200, blank=True)
    reason = models.TextField(blank=True, help_text="Why the instruction exists.")
    affects = models.TextField(
        blank=True, help_text="The failure it prevents or the outcome it is meant to affect."
    )
    review_trigger = models.TextField(
        blank=True, help_text="What change should prompt a review (build system, layout …)."
    )
    deletion_condition = models.TextField(blank=True, help_text="When it can be removed.")
    last_reviewed_on = models.DateField(null=True, blank=True)
    review_due_on = models.DateField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["revision", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["revision", "position"], name="unique_instruction_position"
            ),
            models.CheckConstraint(
                condition=Q(category__in=CategoryChoices.values), name="instruction_valid_category"
            ),
            models.CheckConstraint(
                condition=Q(line_end__gte=models.F("line_start")), name="instruction_line_order"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.position} of {self.revision}"

    def due_date(self, interval_days: int | None = None) -> date | None:
        if self.review_due_on:
            return self.review_due_on
        if self.last_reviewed_on:
            days = interval_days or self.revision.context_file.review_interval_days
            return self.last_reviewed_on + timedelta(days=days)
        return None

    def flags(self, today: date, interval_days: int | None = None) -> list[str]:
        flags = []
        if not self.owner.strip():
            flags.append("no owner")
        if not self.reason.strip():
            flags.append("no reason")
        due = self.due_date(interval_days)
        if due is not None and due < today:
            flags.append("past review date")
        elif due is None:
            flags.append("never reviewed")
        return flags


class RepositoryListing(WorkspaceOwned):
    """The paths (and, when given, content hashes) of a repository at one revision."""

    repository = models.CharField(max_length=300)
    label = models.CharField(max_length=200, blank=True, help_text="Commit or tag it lists.")
    source_format = models.CharField(max_length=64)
    content_hash = models.CharField(max_length=64)
    path_count = models.PositiveIntegerField()
    paths = models.TextField(help_text="One path per line.")
    hashes = models.JSONField(default=dict, blank=True)
    stripped_root = models.CharField(max_length=300, blank=True)
    skipped = models.JSONField(default=list, blank=True)
    skipped_count = models.PositiveIntegerField(default=0)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.repository} @ {self.label or self.content_hash[:10]}"


class CommandVerification(WorkspaceOwned):
    """A person's or a CI job's record of running a command the file names."""

    context_file = models.ForeignKey(
        ContextFile, on_delete=models.CASCADE, related_name="verifications"
    )
    command = models.CharField(max_length=500)
    passed = models.BooleanField()
    exit_code = models.IntegerField(null=True, blank=True)
    repository_revision = models.CharField(max_length=100, blank=True)
    output = models.TextField(blank=True, help_text="An excerpt of the output (≤ 10,000 chars).")
    verified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verified_at = models.DateTimeField()
    via = models.CharField(max_length=8, default="web")

    class Meta:
        ordering = ["-verified_at", "-id"]
        indexes = [models.Index(fields=["context_file", "command", "-verified_at"])]

    def __str__(self) -> str:
        return f"{self.command} {'passed' if self.passed else 'failed'}"


class DriftCheck(WorkspaceOwned):
    """One run of the mechanical checks on one revision (a background job)."""

    revision = models.ForeignKey(
        ContextFileRevision, on_delete=models.CASCADE, related_name="drift_checks"
    )
    listing = models.ForeignKey(
        RepositoryListing, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    job = models.ForeignKey("governance.Job", null=True, blank=True, on_delete=models.SET_NULL)
    counts = models.JSONField(default=dict, blank=True)
    commands = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"drift check #{self.pk} of {self.revision}"


class DriftFinding(WorkspaceOwned):
    class Severity(models.TextChoices):
        ERROR = "error"
        WARNING = "warning"
        INFO = "info"

    drift_check = models.ForeignKey(DriftCheck, on_delete=models.CASCADE, related_name="findings")
    instruction = models.ForeignKey(
        Instruction, null=True, blank=True, on_delete=models.SET_NULL, related_name="findings"
    )
    check_name = models.CharField(max_length=32)
    severity = models.CharField(max_length=8, choices=Severity.choices)
    line = models.PositiveIntegerField(null=True, blank=True)
    message = models.TextField()
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["drift_check", "line", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(severity__in=["error", "warning", "info"]), name="finding_severity"
            )
        ]

    def __str__(self) -> str:
        return f"{self.severity}: {self.message[:60]}"


class Evaluation(WorkspaceOwned):
    """A pre-registered with/without comparison. Locked once any trial is accepted."""

    class Status(models.TextChoices):
        REGISTERED = "registered"
        LOCKED = "locked"
        SUPERSEDED = "superseded"

    context_file = models.ForeignKey(
        ContextFile, on_delete=models.PROTECT, related_name="evaluations"
    )
    revision = models.ForeignKey(
        ContextFileRevision, on_delete=models.PROTECT, related_name="evaluations"
    )
    name = models.CharField(max_length=200)
    primary_metric = models.CharField(max_length=200, default="task success")
    cost_measures = models.JSONField(default=list, blank=True)
    model_name = models.CharField(max_length=200)
    model_version = models.CharField(max_length=200)
    harness_version = models.CharField(max_length=200)
    decoding = models.JSONField(default=dict, blank=True)
    task_set_version = models.CharField(max_length=200)
    expected_tasks = models.PositiveIntegerField(null=True, blank=True)
    delta = models.FloatField(
        help_text="Decision threshold δ: 'helps' needs the 95% lower bound above it."
    )
    margin = models.FloatField(
        help_text="Equivalence bound Δ: 'equivalent' needs the 90% CI inside ±Δ."
    )
    target_power = models.FloatField(default=0.8)
    pilot_discordance = models.FloatField(
        null=True, blank=True, help_text="ψ from a pilot, for the power statement."
    )
    notes = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.REGISTERED)
    fingerprint = models.CharField(max_length=64)
    locked_at = models.DateTimeField(null=True, blank=True)
    supersedes = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )
    supersede_reason = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(margin__gt=0, margin__lt=1), name="evaluation_margin"
            ),
            models.CheckConstraint(condition=Q(delta__gt=-1, delta__lt=1), name="evaluation_delta"),
            models.CheckConstraint(
                condition=Q(target_power__gt=0, target_power__lt=1), name="evaluation_power"
            ),
            models.CheckConstraint(
                condition=Q(pilot_discordance__isnull=True)
                | Q(pilot_discordance__gt=0, pilot_discordance__lte=1),
                name="evaluation_pilot_discordance",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_locked(self) -> bool:
        return self.status != self.Status.REGISTERED


class EvaluationArm(WorkspaceOwned):
    class Kind(models.TextChoices):
        BASELINE = "baseline", "No file (baseline)"
        FULL = "full", "Full file"
        ABLATION = "ablation", "Category ablation"

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="arms")
    name = models.SlugField(max_length=64)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    categories = models.JSONField(default=list, blank=True)
    token_estimate = models.PositiveIntegerField(default=0)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["evaluation", "position"]
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "name"], name="unique_arm_name"),
            models.UniqueConstraint(
                fields=["evaluation", "kind"],
                condition=~Q(kind="ablation"),
                name="one_baseline_and_full_per_evaluation",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def label(self) -> str:
        if self.kind == self.Kind.ABLATION:
            names = [CATEGORY_LABELS[Category(c)] for c in self.categories]
            return f"Only: {', '.join(names)}"
        return self.get_kind_display()


class Trial(WorkspaceOwned):
    """One run of one task in one arm. Paired with the baseline by (task_id, repeat)."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="trials")
    arm = models.ForeignKey(EvaluationArm, on_delete=models.CASCADE, related_name="trials")
    task_id = models.CharField(max_length=200)
    repeat = models.PositiveIntegerField(default=1)
    success = models.BooleanField()
    adherence = models.FloatField(null=True, blank=True)
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    model_calls = models.PositiveIntegerField(null=True, blank=True)
    tool_calls = models.PositiveIntegerField(null=True, blank=True)
    cost = models.FloatField(null=True, blank=True)
    latency_ms = models.PositiveBigIntegerField(null=True, blank=True)
    failure_class = models.CharField(max_length=64, blank=True)
    batch = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["evaluation", "task_id", "repeat", "arm"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "arm", "task_id", "repeat"], name="unique_trial"
            ),
            models.CheckConstraint(condition=Q(repeat__gte=1), name="trial_repeat_positive"),
            models.CheckConstraint(
                condition=Q(adherence__isnull=True) | Q(adherence__gte=0, adherence__lte=1),
                name="trial_adherence_share",
            ),
            models.CheckConstraint(
                condition=Q(cost__isnull=True) | Q(cost__gte=0), name="trial_cost_nonnegative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}#{self.repeat} {self.arm_id}"


class DecisionRecord(WorkspaceOwned):
    """Who decided what about the file after an evaluation, when, and why."""

    class Action(models.TextChoices):
        KEEP = "keep", "Keep the file as it is"
        REVISE = "revise", "Keep some instructions, remove others"
        REMOVE = "remove", "Remove the file"
        KEEP_PROVISIONALLY = "keep_provisionally", "Keep provisionally for a stated safety reason"
        EXTEND = "extend", "Run a larger evaluation"

    evaluation = models.ForeignKey(Evaluation, on_delete=models.PROTECT, related_name="decisions")
    action = models.CharField(max_length=24, choices=Action.choices)
    kept = models.TextField(blank=True, help_text="What was kept (instructions or categories).")
    removed = models.TextField(blank=True, help_text="What was removed.")
    rationale = models.TextField()
    verdict = models.CharField(max_length=16)
    results = models.JSONField(default=dict, help_text="The results as they stood when decided.")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-decided_at", "-id"]

    def __str__(self) -> str:
        return f"{self.get_action_display()} ({self.verdict})"
