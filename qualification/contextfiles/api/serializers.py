"""Input and output serializers for the context-file API."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import serializers

from qualification.contextfiles.analysis.parsing import Category
from qualification.contextfiles.models import (
    CommandVerification,
    ContextFile,
    ContextFileRevision,
    DecisionRecord,
    DriftCheck,
    DriftFinding,
    Evaluation,
    EvaluationArm,
    Instruction,
    RepositoryListing,
    Trial,
)
from qualification.contextfiles.services import COST_MEASURES

CATEGORIES = [c.value for c in Category]


# --- context files ------------------------------------------------------------


class ContextFileImportSerializer(serializers.Serializer):
    repository = serializers.CharField(max_length=300, help_text="e.g. acme/shop")
    path = serializers.CharField(max_length=300, help_text="e.g. AGENTS.md")
    revision = serializers.CharField(
        max_length=100, required=False, allow_blank=True,
        help_text="Commit or tag; when empty, sha256:<first 12 hex digits of the text>.",
    )  # fmt: skip
    text = serializers.CharField(trim_whitespace=False, help_text="The file's full text.")


class InstructionSerializer(serializers.ModelSerializer):
    flags = serializers.SerializerMethodField()
    review_due = serializers.SerializerMethodField()
    revision = serializers.IntegerField(source="revision.number", read_only=True)
    context_file = serializers.IntegerField(source="revision.context_file_id", read_only=True)
    previous = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = Instruction
        fields = [
            "id", "context_file", "revision", "position", "section", "kind", "text",
            "line_start", "line_end", "token_estimate", "category", "category_basis",
            "category_corrected", "change", "previous", "owner", "reason", "affects",
            "review_trigger", "deletion_condition", "last_reviewed_on", "review_due_on",
            "review_due", "flags", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_flags(self, instruction) -> list[str]:
        return instruction.flags(timezone.localdate())

    def get_review_due(self, instruction) -> str | None:
        due = instruction.due_date()
        return due.isoformat() if due else None


class LedgerUpdateSerializer(serializers.Serializer):
    owner = serializers.CharField(max_length=200, required=False, allow_blank=True)
    reason = serializers.CharField(max_length=5000, required=False, allow_blank=True)
    affects = serializers.CharField(
        max_length=5000, required=False, allow_blank=True,
        help_text="The failure it prevents or the outcome it is meant to affect.",
    )  # fmt: skip
    review_trigger = serializers.CharField(max_length=5000, required=False, allow_blank=True)
    deletion_condition = serializers.CharField(max_length=5000, required=False, allow_blank=True)
    last_reviewed_on = serializers.DateField(required=False, allow_null=True)
    review_due_on = serializers.DateField(required=False, allow_null=True)
    category = serializers.ChoiceField(choices=CATEGORIES, required=False)


class ContextFileRevisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ContextFileRevision
        fields = [
            "id", "number", "revision", "content_hash", "token_estimate", "instruction_count",
            "diff_counts", "created_at",
        ]  # fmt: skip


class ContextFileRevisionDetailSerializer(ContextFileRevisionSerializer):
    class Meta(ContextFileRevisionSerializer.Meta):
        fields = [*ContextFileRevisionSerializer.Meta.fields, "text"]


class ContextFileSerializer(serializers.ModelSerializer):
    revisions = ContextFileRevisionSerializer(many=True, read_only=True)

    class Meta:
        model = ContextFile
        fields = ["id", "repository", "path", "review_interval_days", "created_at", "revisions"]


class ContextFileImportResultSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The context file's id.")
    repository = serializers.CharField()
    path = serializers.CharField()
    created = serializers.BooleanField(help_text="False when this revision was already imported.")
    revision = ContextFileRevisionDetailSerializer()
    instructions = InstructionSerializer(many=True)
    drift_check = serializers.IntegerField(allow_null=True)
    drift_check_job = serializers.IntegerField(allow_null=True)


class InstructionChangeSerializer(serializers.Serializer):
    kind = serializers.CharField()
    old = serializers.DictField(allow_null=True)
    new = serializers.DictField(allow_null=True)
    similarity = serializers.FloatField()
    segments = serializers.ListField(child=serializers.DictField())


class InstructionDiffSerializer(serializers.Serializer):
    from_revision = serializers.IntegerField()
    to_revision = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField())
    changes = InstructionChangeSerializer(many=True)


# --- drift --------------------------------------------------------------------


class DriftCheckStartSerializer(serializers.Serializer):
    revision = serializers.IntegerField(
        required=False, help_text="Revision number; the latest when omitted."
    )
    listing = serializers.IntegerField(
        required=False, allow_null=True,
        help_text="Repository listing id; the latest for the repository when omitted.",
    )  # fmt: skip


class DriftFindingSerializer(serializers.ModelSerializer):
    check = serializers.CharField(source="check_name")

    class Meta:
        model = DriftFinding
        fields = ["id", "check", "severity", "line", "instruction", "message", "data"]


class DriftCheckSerializer(serializers.ModelSerializer):
    revision = serializers.IntegerField(source="revision.number")
    status = serializers.CharField(source="job.status", default=None)
    job = serializers.IntegerField(source="job_id")
    findings = DriftFindingSerializer(many=True, read_only=True)

    class Meta:
        model = DriftCheck
        fields = [
            "id", "revision", "listing", "job", "status", "counts", "commands", "created_at",
            "finished_at", "findings",
        ]  # fmt: skip


class RepositoryListingSerializer(serializers.ModelSerializer):
    class Meta:
        model = RepositoryListing
        fields = [
            "id", "repository", "label", "source_format", "content_hash", "path_count",
            "stripped_root", "skipped", "skipped_count", "created_at",
        ]  # fmt: skip


class RepositoryListingUploadSerializer(serializers.Serializer):
    repository = serializers.CharField(max_length=300)
    label = serializers.CharField(max_length=200, required=False, allow_blank=True)
    file = serializers.FileField(
        required=False,
        help_text="A file list (`git ls-files`, `git ls-tree -r HEAD`, `sha256sum`) or a tarball.",
    )
    paths = serializers.ListField(
        child=serializers.CharField(max_length=1024), required=False,
        help_text="Instead of a file: the paths as a JSON list.",
    )  # fmt: skip

    def validate(self, attrs):
        if bool(attrs.get("file")) == bool(attrs.get("paths")):
            raise serializers.ValidationError("Send either a file or a list of paths.")
        return attrs


class CommandVerificationSerializer(serializers.ModelSerializer):
    verified_by = serializers.CharField(source="verified_by.username", default=None)

    class Meta:
        model = CommandVerification
        fields = [
            "id", "context_file", "command", "passed", "exit_code", "repository_revision",
            "output", "verified_by", "verified_at", "via",
        ]  # fmt: skip


class CommandVerificationCreateSerializer(serializers.Serializer):
    context_file = serializers.IntegerField()
    command = serializers.CharField(max_length=500)
    passed = serializers.BooleanField()
    exit_code = serializers.IntegerField(required=False, allow_null=True)
    repository_revision = serializers.CharField(max_length=100, required=False, allow_blank=True)
    output = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False,
        help_text="An excerpt of the output; kept up to 10,000 characters.",
    )  # fmt: skip


# --- evaluations ------------------------------------------------------------------


class EvaluationAblationSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, required=False)
    categories = serializers.ListField(child=serializers.ChoiceField(choices=CATEGORIES))


class EvaluationRegistrationSerializer(serializers.Serializer):
    context_file = serializers.IntegerField()
    revision = serializers.IntegerField(
        required=False, help_text="Revision number of the file; the latest when omitted."
    )
    name = serializers.CharField(max_length=200)
    primary_metric = serializers.CharField(max_length=200, required=False)
    cost_measures = serializers.ListField(
        child=serializers.ChoiceField(choices=COST_MEASURES), required=False
    )
    model_name = serializers.CharField(max_length=200)
    model_version = serializers.CharField(max_length=200)
    harness_version = serializers.CharField(max_length=200)
    decoding = serializers.DictField(required=False)
    task_set_version = serializers.CharField(max_length=200)
    expected_tasks = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    delta = serializers.FloatField(
        required=False, help_text="Decision threshold δ as a difference (0.05 = 5 points)."
    )
    margin = serializers.FloatField(
        required=False,
        help_text="Equivalence bound Δ; default 0.10, or 0.15 when expected_tasks < 80.",
    )
    target_power = serializers.FloatField(required=False)
    pilot_discordance = serializers.FloatField(required=False, allow_null=True)
    notes = serializers.CharField(required=False, allow_blank=True)
    ablations = EvaluationAblationSerializer(many=True, required=False)


class EvaluationRegistrationChangeSerializer(EvaluationRegistrationSerializer):
    context_file = None
    reason = serializers.CharField(
        required=False, allow_blank=True,
        help_text="Why the registration changed; shown on the superseding evaluation.",
    )  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            if name != "reason":
                field.required = False


class EvaluationArmSerializer(serializers.ModelSerializer):
    label = serializers.CharField(read_only=True)

    class Meta:
        model = EvaluationArm
        fields = ["name", "kind", "label", "categories", "token_estimate"]


class EvaluationSerializer(serializers.ModelSerializer):
    revision = serializers.IntegerField(source="revision.number")
    arms = EvaluationArmSerializer(many=True, read_only=True)
    superseded_by = serializers.SerializerMethodField()
    trial_count = serializers.IntegerField(read_only=True, default=None)

    class Meta:
        model = Evaluation
        fields = [
            "id", "context_file", "revision", "name", "primary_metric", "cost_measures",
            "model_name", "model_version", "harness_version", "decoding", "task_set_version",
            "expected_tasks", "delta", "margin", "target_power", "pilot_discordance", "notes",
            "status", "fingerprint", "locked_at", "supersedes", "supersede_reason",
            "superseded_by", "arms", "trial_count", "created_at",
        ]  # fmt: skip

    def get_superseded_by(self, evaluation) -> int | None:
        try:
            return evaluation.superseded_by.pk
        except Evaluation.superseded_by.RelatedObjectDoesNotExist:
            return None


class EvaluationTrialSerializer(serializers.ModelSerializer):
    arm = serializers.CharField(source="arm.name")

    class Meta:
        model = Trial
        fields = [
            "id", "task_id", "arm", "repeat", "success", "adherence", "input_tokens",
            "output_tokens", "model_calls", "tool_calls", "cost", "latency_ms", "failure_class",
            "batch", "created_at",
        ]  # fmt: skip


class EvaluationTrialInputSerializer(serializers.Serializer):
    """Documentation of one trial object; the body is a list of these (or the same as CSV)."""

    task_id = serializers.CharField()
    arm = serializers.CharField(help_text="baseline, full, or an ablation arm's name")
    repeat = serializers.IntegerField(required=False, min_value=1)
    success = serializers.BooleanField()
    adherence = serializers.FloatField(
        required=False, allow_null=True, help_text="true/false or a share in [0, 1]"
    )
    input_tokens = serializers.IntegerField(required=False, min_value=0)
    output_tokens = serializers.IntegerField(required=False, min_value=0)
    model_calls = serializers.IntegerField(required=False, min_value=0)
    tool_calls = serializers.IntegerField(required=False, min_value=0)
    cost = serializers.FloatField(required=False, min_value=0)
    latency_ms = serializers.IntegerField(required=False, min_value=0)
    failure_class = serializers.CharField(required=False, allow_blank=True)


class EvaluationTrialUploadSerializer(serializers.Serializer):
    accepted = serializers.IntegerField()
    already_recorded = serializers.IntegerField()
    locked_now = serializers.BooleanField()
    batch = serializers.CharField()
    status = serializers.CharField()


class TrialLineErrorSerializer(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()


class EvaluationTrialErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = TrialLineErrorSerializer(many=True)


class PairedTableCountsSerializer(serializers.Serializer):
    both = serializers.IntegerField()
    with_only = serializers.IntegerField()
    without_only = serializers.IntegerField()
    neither = serializers.IntegerField()


class EvaluationResultsSerializer(serializers.Serializer):
    """Results of the full file against the baseline, plus every arm."""

    status = serializers.ChoiceField(choices=["ok", "awaiting_trials"])
    n_pairs = serializers.IntegerField()
    table = PairedTableCountsSerializer(allow_null=True)
    difference = serializers.FloatField(allow_null=True)
    ci95 = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    ci90 = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    ci_method = serializers.CharField(allow_null=True)
    mcnemar_p_exact = serializers.FloatField(allow_null=True)
    mcnemar_midp = serializers.FloatField(allow_null=True)
    equivalent = serializers.BooleanField(allow_null=True)
    within_margin = serializers.BooleanField(
        allow_null=True,
        help_text="The 90% CI lies inside ±Δ. True beside 'helps' or 'hurts' means a "
        "significant difference that is smaller than the equivalence bound: never reported as "
        "just 'equivalent'.",
    )
    verdict = serializers.ChoiceField(
        choices=["helps", "equivalent", "hurts", "inconclusive"], allow_null=True
    )
    verdict_reason = serializers.CharField(allow_null=True)
    delta = serializers.FloatField()
    margin = serializers.FloatField()
    power = serializers.FloatField(
        allow_null=True,
        help_text="Power to detect δ (or Δ when δ ≤ 0) with McNemar at α = .05 (Connor 1987).",
    )
    needed_pairs = serializers.IntegerField(
        allow_null=True, help_text="Pairs needed for the target power on that question."
    )
    power_detail = serializers.DictField(allow_null=True)
    task_level = serializers.DictField(allow_null=True)
    arms = serializers.DictField(child=serializers.DictField())
    notes = serializers.ListField(child=serializers.CharField())


class EvaluationDecisionSerializer(serializers.ModelSerializer):
    decided_by = serializers.CharField(source="decided_by.username", default=None)

    class Meta:
        model = DecisionRecord
        fields = [
            "id", "evaluation", "action", "kept", "removed", "rationale", "verdict", "results",
            "decided_by", "decided_at",
        ]  # fmt: skip


class EvaluationDecisionCreateSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=DecisionRecord.Action.choices)
    kept = serializers.CharField(required=False, allow_blank=True)
    removed = serializers.CharField(required=False, allow_blank=True)
    rationale = serializers.CharField()


class PairedComparisonQuerySerializer(serializers.Serializer):
    both = serializers.IntegerField(min_value=0)
    with_only = serializers.IntegerField(min_value=0)
    without_only = serializers.IntegerField(min_value=0)
    neither = serializers.IntegerField(min_value=0)
    delta = serializers.FloatField(default=0.05, min_value=0, max_value=0.99)
    margin = serializers.FloatField(default=0.10, min_value=0.005, max_value=0.5)
    pilot_discordance = serializers.FloatField(required=False, min_value=0.001, max_value=1)

    def validate(self, attrs):
        if attrs["both"] + attrs["with_only"] + attrs["without_only"] + attrs["neither"] == 0:
            raise serializers.ValidationError("The table is empty: give at least one pair.")
        return attrs
