"""Specifications, their versions and items, review decisions, and restart packages.

The database keeps the chain honest: one authoritative version per spec (a partial unique
index), one accepted successor per version and one accepted root per spec (so accepted
versions form a single line), no self-review and no rejection without a comment. Version
numbers only grow and `supersedes` always names an earlier number of the same spec, so the
chain cannot cycle.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from governance.models import WorkspaceOwned
from specs.analysis import content
from specs.validators import validate_commit

RESERVED_SLUGS = frozenset({"new", "review", "versions", "restart-packages", "suggest-key", "row"})


class Consequence(models.TextChoices):
    LOW = "low", "low"
    HIGH = "high", "high"


class VersionStatus(models.TextChoices):
    DRAFT = "draft", "draft"
    IN_REVIEW = "in_review", "in review"
    AUTHORITATIVE = "authoritative", "authoritative"
    REJECTED = "rejected", "rejected"
    SUPERSEDED = "superseded", "superseded"

    @classmethod
    def accepted(cls) -> list[str]:
        """Statuses of versions that were once authoritative: the chain itself."""
        return [cls.AUTHORITATIVE, cls.SUPERSEDED]


class ItemKind(models.TextChoices):
    REQUIREMENT = "requirement", "requirement"
    CONSTRAINT = "constraint", "constraint"
    DEFINITION = "definition", "definition"
    INTERFACE = "interface", "interface"
    DECISION = "decision", "decision"
    OPEN_QUESTION = "open_question", "open question"


class ItemStatus(models.TextChoices):
    SETTLED = content.SETTLED, "settled"
    UNRESOLVED = content.UNRESOLVED, "unresolved"


class Spec(WorkspaceOwned):
    """The single authoritative statement of settled requirements on one subject."""

    title = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80)
    summary = models.TextField(blank=True, help_text="What this specification governs.")
    project = models.CharField(
        max_length=1000,
        blank=True,
        default="",
        help_text="The project (working directory) it governs: each compaction of a session "
        "in this directory, or below it, is audited against the authoritative version.",
    )
    consequence = models.CharField(
        max_length=8,
        choices=Consequence.choices,
        default=Consequence.HIGH,
        help_text="High: a reviewer other than the author approves each version.",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title", "id"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "slug"], name="spec_unique_slug"),
            models.CheckConstraint(
                condition=Q(consequence__in=Consequence.values), name="spec_valid_consequence"
            ),
        ]

    def __str__(self) -> str:
        return self.title


class SpecVersion(WorkspaceOwned):
    """One consolidation of a spec: immutable once submitted, identified by its fingerprint."""

    spec = models.ForeignKey(Spec, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="successors"
    )
    status = models.CharField(
        max_length=16, choices=VersionStatus.choices, default=VersionStatus.DRAFT
    )
    fingerprint = models.CharField(max_length=64, help_text="sha256 of the canonical items.")
    note = models.TextField(blank=True, help_text="What this version changes and why.")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who approved or rejected it; empty when a low-consequence submit accepted it.",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    review_comment = models.TextField(blank=True)
    acknowledged_resolutions = models.JSONField(
        default=list, blank=True, help_text="Keys of resolved open questions acknowledged."
    )
    superseded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["spec_id", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["spec", "number"], name="spec_version_unique_number"),
            models.UniqueConstraint(
                fields=["spec"],
                condition=Q(status=VersionStatus.AUTHORITATIVE),
                name="spec_one_authoritative_version",
            ),
            models.UniqueConstraint(
                fields=["supersedes"],
                condition=Q(status__in=VersionStatus.accepted()),
                name="spec_version_chain_never_forks",
            ),
            models.UniqueConstraint(
                fields=["spec"],
                condition=Q(supersedes__isnull=True, status__in=VersionStatus.accepted()),
                name="spec_version_one_chain_root",
            ),
            models.CheckConstraint(
                condition=Q(status__in=VersionStatus.values), name="spec_version_valid_status"
            ),
            models.CheckConstraint(condition=Q(number__gte=1), name="spec_version_number_positive"),
            models.CheckConstraint(
                condition=Q(reviewer__isnull=True)
                | Q(author__isnull=True)
                | ~Q(reviewer=models.F("author")),
                name="spec_version_no_self_review",
            ),
            models.CheckConstraint(
                condition=~Q(status=VersionStatus.REJECTED) | ~Q(review_comment=""),
                name="spec_version_rejection_has_comment",
            ),
        ]
        indexes = [models.Index(fields=["workspace", "status"])]

    def __str__(self) -> str:
        return f"{self.spec.title} v{self.number}"

    @property
    def label(self) -> str:
        return f"v{self.number}"

    @property
    def short_fingerprint(self) -> str:
        return self.fingerprint[:12]

    @property
    def is_draft(self) -> bool:
        return self.status == VersionStatus.DRAFT

    @property
    def is_in_review(self) -> bool:
        return self.status == VersionStatus.IN_REVIEW

    @property
    def is_authoritative(self) -> bool:
        return self.status == VersionStatus.AUTHORITATIVE

    def as_items(self) -> list[content.Item]:
        """The version's items as plain data, read fresh from the database."""
        rows = self.items.order_by("position").prefetch_related("alternatives")
        return [row.as_content() for row in rows]


class SpecItem(WorkspaceOwned):
    version = models.ForeignKey(SpecVersion, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    key = models.CharField(max_length=content.KEY_MAX_LENGTH)
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    text = models.TextField()
    rationale = models.TextField(blank=True)
    status = models.CharField(max_length=12, choices=ItemStatus.choices, default=ItemStatus.SETTLED)

    class Meta:
        ordering = ["version_id", "position"]
        constraints = [
            models.UniqueConstraint(
                Lower("key"), "version", name="spec_item_unique_key_ignoring_case"
            ),
            models.UniqueConstraint(
                fields=["version", "position"], name="spec_item_unique_position"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=ItemKind.values), name="spec_item_valid_kind"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ItemStatus.values), name="spec_item_valid_status"
            ),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def is_unresolved(self) -> bool:
        return self.status == ItemStatus.UNRESOLVED

    def as_content(self) -> content.Item:
        return content.Item(
            key=self.key,
            kind=self.kind,
            text=self.text,
            rationale=self.rationale,
            status=self.status,
            alternatives=tuple(
                content.Alternative(text=a.text, evidence=a.evidence)
                for a in self.alternatives.all()
            ),
        )


class ItemAlternative(WorkspaceOwned):
    """One option of an open question (or an option considered for a decision), with evidence."""

    item = models.ForeignKey(SpecItem, on_delete=models.CASCADE, related_name="alternatives")
    position = models.PositiveIntegerField()
    text = models.TextField()
    evidence = models.TextField(blank=True)

    class Meta:
        ordering = ["item_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "position"], name="spec_alternative_unique_position"
            )
        ]

    def __str__(self) -> str:
        return self.text[:60]


class SourceKind(models.TextChoices):
    TRACE_SESSION = "trace_session", "trace session"
    TRACE_RUN = "trace_run", "trace run"
    REFERENCE = "reference", "reference"
    DIVERGENCE = "divergence", "first divergence"


class SpecSource(WorkspaceOwned):
    """What a version was consolidated from: a trace session, run or first-divergence mark,
    or a free reference."""

    version = models.ForeignKey(SpecVersion, on_delete=models.CASCADE, related_name="sources")
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=SourceKind.choices)
    trace_session = models.ForeignKey(
        "traces.Session", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    run = models.ForeignKey(
        "traces.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    divergence = models.ForeignKey(
        "annotations.Divergence",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="spec_sources",
    )
    url = models.URLField(max_length=1000, blank=True)
    label = models.CharField(
        max_length=300, blank=True, help_text="Kept when a linked trace object is deleted."
    )

    class Meta:
        ordering = ["version_id", "position"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=SourceKind.values), name="spec_source_valid_kind"
            ),
            models.CheckConstraint(
                condition=(Q(kind=SourceKind.REFERENCE) & ~Q(url=""))
                | (~Q(kind=SourceKind.REFERENCE) & Q(url="")),
                name="spec_source_reference_has_url",
            ),
        ]

    def __str__(self) -> str:
        return self.label or self.url or self.kind

    @property
    def token(self) -> str:
        """The Markdown form: the URL, trace-session:<id>, trace-run:<id> or
        trace-divergence:<id>."""
        if self.kind == SourceKind.TRACE_SESSION:
            return f"trace-session:{self.trace_session_id}" if self.trace_session_id else ""
        if self.kind == SourceKind.TRACE_RUN:
            return f"trace-run:{self.run_id}" if self.run_id else ""
        if self.kind == SourceKind.DIVERGENCE:
            return f"trace-divergence:{self.divergence_id}" if self.divergence_id else ""
        return self.url


class TextBlob(WorkspaceOwned):
    """Raw text kept verbatim with its fingerprint (stored once per workspace).

    Holds verification output until the artifact store lands; `Verification` will then gain
    an optional `artifact` foreign key alongside this one.
    """

    sha256 = models.CharField(max_length=64)
    size_bytes = models.PositiveBigIntegerField()
    line_count = models.PositiveIntegerField()
    content = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "sha256"], name="text_blob_unique_content")
        ]

    def __str__(self) -> str:
        return f"sha256:{self.sha256[:12]} ({self.size_bytes} bytes)"


class RestartPackage(WorkspaceOwned):
    """A pinned authoritative spec version, an execution handoff and a starting instruction."""

    title = models.CharField(max_length=200)
    spec_version = models.ForeignKey(
        SpecVersion, on_delete=models.PROTECT, related_name="restart_packages"
    )
    trace_session = models.ForeignKey(
        "traces.Session",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The session this package restarts.",
    )
    # Execution handoff: observations of repository state.
    repository_remote = models.CharField(max_length=500, blank=True)
    branch = models.CharField(max_length=300, blank=True)
    commit = models.CharField(max_length=64, validators=[validate_commit])
    completed_changes = models.JSONField(default=list, blank=True)
    changed_files = models.JSONField(default=list, blank=True)
    current_failures = models.JSONField(default=list, blank=True)
    discrepancies = models.JSONField(
        default=list, blank=True, help_text="[{claim, source, repository_state}]"
    )
    # Starting instruction.
    authoritative_sources = models.JSONField(default=list, blank=True)
    next_action = models.TextField()
    indicators = models.JSONField(default=list, blank=True, help_text="[{slug, note}]")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "-created_at"])]

    def __str__(self) -> str:
        return self.title

    @property
    def is_superseded(self) -> bool:
        return self.spec_version.status != VersionStatus.AUTHORITATIVE


class Verification(WorkspaceOwned):
    """A check already run: command, exit status, the commit it ran against, raw output."""

    package = models.ForeignKey(
        RestartPackage, on_delete=models.CASCADE, related_name="verifications"
    )
    position = models.PositiveIntegerField()
    command = models.TextField()
    exit_status = models.IntegerField()
    commit = models.CharField(max_length=64, validators=[validate_commit])
    ran_at = models.DateTimeField(null=True, blank=True)
    output = models.ForeignKey(TextBlob, on_delete=models.PROTECT, related_name="+")
    artifact = models.ForeignKey(
        "artifacts.Artifact",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The raw output in the artifact store (redacted there); the blob is the same bytes.",
    )

    class Meta:
        ordering = ["package_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["package", "position"], name="verification_unique_position"
            )
        ]

    def __str__(self) -> str:
        return f"{self.command[:60]} → {self.exit_status}"


class SurvivalAudit(WorkspaceOwned):
    """One compaction summary compared with the settled items of one authoritative version."""

    compaction = models.ForeignKey(
        "traces.Compaction", on_delete=models.CASCADE, related_name="survival_audits"
    )
    spec_version = models.ForeignKey(
        SpecVersion, on_delete=models.CASCADE, related_name="survival_audits"
    )
    method = models.CharField(max_length=32)
    threshold = models.FloatField(help_text="Share of an item's content words that keeps it.")
    summary_sha256 = models.CharField(max_length=64, help_text="The summary that was compared.")
    ran_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["compaction_id", "-ran_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["compaction", "spec_version"], name="survival_audit_unique_version"
            )
        ]

    def __str__(self) -> str:
        return f"survival of compaction {self.compaction_id} against {self.spec_version_id}"


class SurvivalVerdict(WorkspaceOwned):
    """Kept or lost for one settled item: the computed verdict and a person's correction.

    A re-run rewrites `kept`, `score` and `reason`; the correction fields are written only by
    a person, so a correction outlives every re-run."""

    audit = models.ForeignKey(SurvivalAudit, on_delete=models.CASCADE, related_name="verdicts")
    item = models.ForeignKey(SpecItem, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    key = models.CharField(max_length=content.KEY_MAX_LENGTH)
    kept = models.BooleanField()
    score = models.FloatField()
    reason = models.CharField(max_length=500)
    missing = models.JSONField(default=list, blank=True)
    corrected_kept = models.BooleanField(
        null=True, blank=True, help_text="A person's verdict; empty: the computed one stands."
    )
    corrected_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    corrected_at = models.DateTimeField(null=True, blank=True)
    correction_note = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["audit_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "item"], name="survival_verdict_unique_item"),
            models.CheckConstraint(
                condition=Q(corrected_kept__isnull=True) | Q(corrected_at__isnull=False),
                name="survival_verdict_correction_has_time",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key}: {'kept' if self.final_kept else 'lost'}"

    @property
    def final_kept(self) -> bool:
        """The verdict that counts: a person's correction, else the computed one."""
        return self.kept if self.corrected_kept is None else self.corrected_kept

    @property
    def is_corrected(self) -> bool:
        return self.corrected_kept is not None
