"""Qualification models: pinned model configurations, workloads and their task families,
context-size sweeps with their trials and cached analyses, operating limits with per-source and
per-stage budgets, and the assembly audits that budget checks leave behind.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from governance.models import WorkspaceOwned
from qualification.analysis.limits import RESERVE_ACTIONS
from qualification.formats.trials import FAILURE_CLASSES


class FamilyKind(models.TextChoices):
    RETRIEVAL = "retrieval", "Retrieval across several documents"
    AGGREGATION = "aggregation", "Aggregation of several pieces of evidence"
    RETENTION = "retention", "Retention of early instructions"
    LONG_CODE = "long_code", "Reasoning over long code"
    TOOL_TRAJECTORY = "tool_trajectory", "Tool-using trajectory"
    CODE_CHANGE = "code_change", "Code change (patch correctness)"
    CUSTOM = "custom", "Custom"


class Consequence(models.TextChoices):
    LOW = "low", "Low: cheap retries, deterministic verification"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High: costly failure, weak verification"


class QualificationStatus(models.TextChoices):
    COLLECTING = "collecting", "collecting trials"
    LOCKED = "locked", "locked"
    SUPERSEDED = "superseded", "superseded"


class LimitStatus(models.TextChoices):
    PROPOSED = "proposed"
    APPROVED = "approved"
    SUPERSEDED = "superseded"
    WITHDRAWN = "withdrawn"


ReserveAction = models.TextChoices(
    "ReserveAction", [(key, (key, label)) for key, label in RESERVE_ACTIONS.items()]
)
FailureClass = models.TextChoices(
    "FailureClass", [(key, (key, label)) for key, label in FAILURE_CLASSES.items()]
)


class ModelConfiguration(WorkspaceOwned):
    """A pinned configuration. Its fingerprint changes whenever any pinned field changes."""

    model_name = models.CharField(max_length=200)
    model_version = models.CharField(max_length=200)
    decoding = models.JSONField(default=dict, blank=True, help_text="e.g. temperature, top_p")
    harness_version = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=200, blank=True)
    evaluator_version = models.CharField(max_length=200, blank=True)
    fingerprint = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model_name", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "fingerprint"], name="model_configuration_unique_fingerprint"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model_name} {self.model_version} ({self.fingerprint[:10]})"

    def pinned_fields(self) -> dict:
        return {
            "model_name": self.model_name,
            "model_version": self.model_version,
            "decoding": self.decoding,
            "harness_version": self.harness_version,
            "prompt_version": self.prompt_version,
            "evaluator_version": self.evaluator_version,
        }


class Workload(WorkspaceOwned):
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "name", "version"], name="workload_unique_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class TaskFamily(WorkspaceOwned):
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="families")
    key = models.SlugField(max_length=64, help_text="The `family` value trials carry.")
    kind = models.CharField(max_length=20, choices=FamilyKind.choices, default=FamilyKind.CUSTOM)
    label = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["workload", "key"]
        constraints = [
            models.UniqueConstraint(fields=["workload", "key"], name="task_family_unique_key")
        ]

    def __str__(self) -> str:
        return self.key


class Task(WorkspaceOwned):
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="tasks")
    family = models.ForeignKey(TaskFamily, on_delete=models.CASCADE, related_name="tasks")
    external_id = models.CharField(max_length=200)

    class Meta:
        ordering = ["family", "external_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload", "external_id"], name="task_unique_external_id"
            )
        ]

    def __str__(self) -> str:
        return self.external_id


class Qualification(WorkspaceOwned):
    """A context-size sweep of one configuration on one workload against a pre-registered θ."""

    name = models.CharField(max_length=200)
    configuration = models.ForeignKey(
        ModelConfiguration, on_delete=models.PROTECT, related_name="qualifications"
    )
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="qualifications")
    strata = models.JSONField(
        default=list, blank=True, help_text="Declared context sizes in tokens; empty: from trials."
    )
    threshold = models.FloatField(help_text="Pre-registered reliability threshold θ.")
    consequence = models.CharField(
        max_length=8, choices=Consequence.choices, default=Consequence.MEDIUM
    )
    analysis_params = models.JSONField(
        default=dict, blank=True, help_text="Overrides of the METHODS.md §7 defaults."
    )
    status = models.CharField(
        max_length=12, choices=QualificationStatus.choices, default=QualificationStatus.COLLECTING
    )
    supersedes = models.OneToOneField(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="superseded_by",
        help_text="The previous qualification of the same model and workload.",
    )
    data_version = models.PositiveIntegerField(
        default=0, help_text="Bumped with every trial batch; keys the analysis cache."
    )
    notes = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    locked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(threshold__gt=0) & Q(threshold__lt=1), name="qualification_theta_range"
            ),
            models.CheckConstraint(
                condition=Q(status__in=QualificationStatus.values), name="qualification_status"
            ),
            models.CheckConstraint(
                condition=Q(consequence__in=Consequence.values), name="qualification_consequence"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def accepts_trials(self) -> bool:
        return self.status == QualificationStatus.COLLECTING


class TrialUpload(WorkspaceOwned):
    """One batch of trials exactly as received (file or API body), kept as evidence."""

    class Status(models.TextChoices):
        PENDING = "pending"
        LOADED = "loaded"
        REJECTED = "rejected"

    qualification = models.ForeignKey(
        Qualification, on_delete=models.CASCADE, related_name="uploads"
    )
    file = models.FileField(upload_to="qualification/trials/%Y/%m/", max_length=300)
    original_name = models.CharField(max_length=300)
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    format = models.CharField(max_length=8, blank=True)
    source = models.CharField(max_length=8, default="web")
    partial = models.BooleanField(
        default=False, help_text="Pairing across strata is checked at analysis, not on upload."
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    rows_loaded = models.PositiveIntegerField(default=0)
    job = models.ForeignKey(
        "governance.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.original_name} ({self.sha256[:12]})"


class Trial(WorkspaceOwned):
    qualification = models.ForeignKey(
        Qualification, on_delete=models.CASCADE, related_name="trials"
    )
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="trials")
    stratum_tokens = models.PositiveIntegerField()
    repeat = models.PositiveIntegerField()
    retrieval_correct = models.BooleanField(null=True, blank=True)
    task_correct = models.BooleanField()
    input_tokens = models.PositiveBigIntegerField()
    output_tokens = models.PositiveBigIntegerField()
    model_calls = models.PositiveIntegerField(null=True, blank=True)
    tool_calls = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    failure_class = models.CharField(max_length=40, choices=FailureClass.choices, blank=True)
    session = models.ForeignKey(
        "traces.Session", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    session_ref = models.CharField(
        max_length=200, blank=True, help_text="The trace session id as the trial named it."
    )
    upload = models.ForeignKey(
        TrialUpload, null=True, blank=True, on_delete=models.SET_NULL, related_name="trials"
    )
    line = models.PositiveIntegerField(null=True, blank=True, help_text="Line in the upload.")
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["task", "stratum_tokens", "repeat"]
        constraints = [
            models.UniqueConstraint(
                fields=["qualification", "task", "stratum_tokens", "repeat"],
                name="trial_unique_cell_repeat",
            ),
            models.CheckConstraint(
                condition=Q(stratum_tokens__gt=0), name="trial_stratum_positive"
            ),
        ]
        indexes = [models.Index(fields=["qualification", "stratum_tokens"])]

    def __str__(self) -> str:
        return f"{self.task_id}@{self.stratum_tokens}#{self.repeat}"


class QualificationAnalysis(WorkspaceOwned):
    """The analysis of one qualification version under one set of parameters (a cache row)."""

    qualification = models.ForeignKey(
        Qualification, on_delete=models.CASCADE, related_name="analyses"
    )
    data_version = models.PositiveIntegerField()
    params_fingerprint = models.CharField(max_length=64)
    params = models.JSONField(default=dict)
    result = models.JSONField(default=dict)
    duration_ms = models.PositiveIntegerField(default=0)
    job = models.ForeignKey(
        "governance.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    computed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-computed_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["qualification", "data_version", "params_fingerprint"],
                name="qualification_analysis_unique_version",
            )
        ]

    def __str__(self) -> str:
        return f"analysis of {self.qualification_id} v{self.data_version}"


class OperatingLimit(WorkspaceOwned):
    """Reviewed limits for one deployment, justified by a qualification. Approved: immutable."""

    name = models.CharField(max_length=200)
    qualification = models.ForeignKey(
        Qualification, on_delete=models.PROTECT, related_name="operating_limits"
    )
    configuration_fingerprint = models.CharField(max_length=64)
    status = models.CharField(max_length=12, choices=LimitStatus.choices, default="proposed")
    max_context_tokens = models.PositiveIntegerField(
        help_text="The most context a trajectory may reach: the qualified production limit."
    )
    max_initial_assembly_tokens = models.PositiveIntegerField()
    reserve_tokens = models.PositiveIntegerField(help_text="Kept for tool output and correction.")
    reserve_action = models.CharField(
        max_length=20, choices=ReserveAction.choices, default="compact"
    )
    source_limits = models.JSONField(default=dict, blank=True, help_text="{source: max tokens}")
    stage_budgets = models.JSONField(
        default=list, blank=True, help_text="[{key, label, max_tokens, target_tokens, action}]"
    )
    rationale = models.TextField(blank=True, help_text="Why this margin for this consequence.")
    justification = models.JSONField(
        default=dict, blank=True, help_text="The analysis numbers the proposal was based on."
    )
    analysis_data_version = models.PositiveIntegerField(default=0)
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="successors"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    contributor_ids = models.JSONField(
        default=list, blank=True, help_text="Everyone who proposed or edited it: none may approve."
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    max_initial_assembly_tokens__lte=F("max_context_tokens") - F("reserve_tokens")
                ),
                name="operating_limit_assembly_leaves_reserve",
            ),
            models.CheckConstraint(
                condition=Q(status__in=LimitStatus.values), name="operating_limit_status"
            ),
            models.CheckConstraint(
                condition=~Q(status="approved") | Q(approved_by__isnull=False),
                name="operating_limit_approved_has_reviewer",
            ),
            # A limit is superseded by at most one approved successor: chains never fork.
            models.UniqueConstraint(
                fields=["supersedes"],
                condition=Q(status__in=["approved", "superseded"]),
                name="operating_limit_one_successor",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status == LimitStatus.APPROVED


class AssemblyAudit(WorkspaceOwned):
    """One budget check: the allocation by source, the prompt if sent, and what was left out."""

    operating_limit = models.ForeignKey(
        OperatingLimit, on_delete=models.PROTECT, related_name="audits"
    )
    stage = models.CharField(max_length=64, blank=True)
    allocation = models.JSONField(default=dict)
    total = models.PositiveBigIntegerField()
    limit = models.PositiveBigIntegerField()
    reserve_left = models.BigIntegerField()
    verdict = models.CharField(max_length=8)
    over_sources = models.JSONField(default=list, blank=True)
    unbudgeted_sources = models.JSONField(default=list, blank=True)
    reasons = models.JSONField(default=list, blank=True)
    action = models.CharField(max_length=20)
    above_target = models.BooleanField(default=False)
    assembled_prompt = models.TextField(blank=True)
    prompt_sha256 = models.CharField(max_length=64, blank=True)
    prompt_chars = models.PositiveIntegerField(default=0)
    omissions = models.JSONField(default=list, blank=True)
    run_ref = models.CharField(max_length=200, blank=True, help_text="The run or session checked.")
    source = models.CharField(max_length=8, default="api")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "operating_limit", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(verdict__in=["within", "over"]), name="assembly_audit_verdict"
            )
        ]

    def __str__(self) -> str:
        return f"budget check #{self.pk} ({self.verdict})"
