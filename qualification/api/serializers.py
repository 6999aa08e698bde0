"""Input and output serializers for the qualification API."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.api.serializers import JobSerializer
from qualification import selectors
from qualification.analysis.limits import RESERVE_ACTIONS
from qualification.models import (
    AssemblyAudit,
    Consequence,
    ModelConfiguration,
    OperatingLimit,
    Qualification,
    ReserveAction,
    Trial,
    Workload,
)
from qualification.services.limits import APPROVAL_CONFIRMATION, COMMENT_MAX_CHARS

# --- qualifications ------------------------------------------------------------------


class ModelInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    version = serializers.CharField(max_length=200)


class ConfigurationInputSerializer(serializers.Serializer):
    decoding = serializers.DictField(required=False, help_text='e.g. {"temperature": 0}')
    harness_version = serializers.CharField(required=False, allow_blank=True, max_length=200)
    prompt_version = serializers.CharField(required=False, allow_blank=True, max_length=200)
    evaluator_version = serializers.CharField(required=False, allow_blank=True, max_length=200)


class FamilyInputSerializer(serializers.Serializer):
    key = serializers.SlugField(max_length=64)
    kind = serializers.CharField(required=False, help_text="retrieval, aggregation, … or custom")
    label = serializers.CharField(required=False, allow_blank=True, max_length=200)


class WorkloadInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    version = serializers.CharField(max_length=100)
    families = serializers.ListField(
        child=serializers.JSONField(),
        required=False,
        help_text="Keys or {key, kind, label}. A new workload defaults to the six standard "
        "families; an existing one gains any listed family it lacks.",
    )


class QualificationCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    model = ModelInputSerializer()
    configuration = ConfigurationInputSerializer(required=False)
    workload = WorkloadInputSerializer()
    threshold = serializers.FloatField(help_text="Pre-registered θ, strictly between 0 and 1.")
    consequence = serializers.ChoiceField(choices=Consequence.choices, default="medium")
    strata = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        help_text="Declared context sizes in tokens; trials at other sizes are rejected.",
    )
    supersedes = serializers.IntegerField(
        required=False, allow_null=True, help_text="Id of the qualification this requalifies."
    )
    analysis_params = serializers.DictField(
        required=False, help_text="Overrides of the METHODS.md §7 defaults, e.g. knee_delta."
    )
    notes = serializers.CharField(required=False, allow_blank=True)


class QualificationUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    notes = serializers.CharField(required=False, allow_blank=True)
    threshold = serializers.FloatField(required=False)
    consequence = serializers.ChoiceField(choices=Consequence.choices, required=False)
    strata = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False)
    analysis_params = serializers.DictField(required=False)


class ConfigurationSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelConfiguration
        fields = [
            "id", "model_name", "model_version", "decoding", "harness_version",
            "prompt_version", "evaluator_version", "fingerprint", "created_at",
        ]  # fmt: skip


class WorkloadSerializer(serializers.ModelSerializer):
    families = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = ["id", "name", "version", "description", "families", "created_at"]

    def get_families(self, workload) -> list[dict]:
        return [{"key": f.key, "kind": f.kind, "label": f.label} for f in workload.families.all()]


class QualificationSerializer(serializers.ModelSerializer):
    configuration = ConfigurationSerializer()
    workload = WorkloadSerializer()
    superseded_by = serializers.SerializerMethodField()
    trial_count = serializers.SerializerMethodField()
    effective_params = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = Qualification
        fields = [
            "id", "name", "status", "configuration", "workload", "strata", "threshold",
            "consequence", "analysis_params", "effective_params", "supersedes",
            "superseded_by", "data_version", "trial_count", "notes", "created_by",
            "created_at", "locked_at",
        ]  # fmt: skip

    def get_superseded_by(self, qualification) -> int | None:
        successor = getattr(qualification, "superseded_by", None)
        return successor.pk if successor else None

    def get_trial_count(self, qualification) -> int:
        count = getattr(qualification, "trial_count", None)
        return count if count is not None else qualification.trials.count()

    def get_effective_params(self, qualification) -> dict:
        return selectors.analysis_params_for(qualification).as_dict()


# --- trials ----------------------------------------------------------------------------


class TrialSerializer(serializers.ModelSerializer):
    task_id = serializers.CharField(source="task.external_id")
    family = serializers.CharField(source="task.family.key")
    session_id = serializers.CharField(source="session_ref")
    session = serializers.IntegerField(source="session_id", allow_null=True)

    class Meta:
        model = Trial
        fields = [
            "id", "task_id", "family", "stratum_tokens", "repeat", "retrieval_correct",
            "task_correct", "input_tokens", "output_tokens", "model_calls", "tool_calls",
            "cost_usd", "latency_ms", "failure_class", "session_id", "session", "upload", "line",
            "extra",
        ]  # fmt: skip


class TrialInputSerializer(serializers.Serializer):
    """Documents one trial object; validation (with line numbers) happens in the loader."""

    task_id = serializers.CharField()
    family = serializers.CharField()
    stratum_tokens = serializers.IntegerField(min_value=1)
    repeat = serializers.IntegerField(min_value=0)
    retrieval_correct = serializers.BooleanField(required=False, allow_null=True)
    task_correct = serializers.BooleanField()
    input_tokens = serializers.IntegerField(min_value=0)
    output_tokens = serializers.IntegerField(min_value=0)
    model_calls = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    tool_calls = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=6, required=False)
    latency_ms = serializers.IntegerField(min_value=0, required=False)
    failure_class = serializers.CharField(required=False)
    session_id = serializers.CharField(required=False, help_text="A trace session's id.")


class TrialBatchSerializer(serializers.Serializer):
    upload = serializers.IntegerField()
    status = serializers.CharField()
    trials_saved = serializers.IntegerField()
    job = serializers.DictField()
    errors = serializers.ListField(child=serializers.DictField())


# --- results (documentation of the stored analysis) ----------------------------------


class StratumResultSerializer(serializers.Serializer):
    tokens = serializers.IntegerField()
    tasks = serializers.IntegerField()
    repeats = serializers.IntegerField(help_text="Fewest repeats of any task here.")
    accuracy = serializers.FloatField(allow_null=True, help_text="Mean per-task pass rate.")
    ci = serializers.ListField(
        child=serializers.FloatField(allow_null=True),
        help_text="Two-sided (1 − 2α) task-clustered interval; its lower edge is the one-sided "
        "bound compared with θ.",
    )
    passes = serializers.BooleanField()
    reliability = serializers.FloatField(allow_null=True, help_text="Mean per-task pass^k.")
    retrieval = serializers.FloatField(allow_null=True)


class RefusalSerializer(serializers.Serializer):
    rule = serializers.ChoiceField(choices=["no_trials", "min_repeats", "min_tasks", "unpaired"])
    family = serializers.CharField()
    message = serializers.CharField()
    remedy = serializers.CharField(help_text="What data would fix it.")
    strata = serializers.ListField(child=serializers.IntegerField())
    tasks = serializers.ListField(child=serializers.CharField())


class FamilyResultSerializer(serializers.Serializer):
    family = serializers.CharField()
    tasks = serializers.IntegerField()
    strata = StratumResultSerializer(many=True)
    ecl_tokens = serializers.IntegerField(allow_null=True)
    ecl_status = serializers.ChoiceField(
        choices=["within_range", "at_least_largest", "below_smallest", "refused"]
    )
    ecl_text = serializers.CharField()
    ecl_lower95_tokens = serializers.IntegerField(allow_null=True)
    ecl_lower_tokens = serializers.IntegerField(
        allow_null=True, help_text="Lower ECL at the consequence's confidence."
    )
    p_ecl_at_least = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    knee_tokens = serializers.IntegerField(allow_null=True)
    saturation_tokens = serializers.IntegerField(allow_null=True)
    refusals = RefusalSerializer(many=True)


class ResultsSerializer(serializers.Serializer):
    qualification = serializers.IntegerField()
    data_version = serializers.IntegerField()
    computed_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=["ok", "insufficient"])
    reasons = RefusalSerializer(many=True)
    families = FamilyResultSerializer(many=True)
    overall = FamilyResultSerializer(allow_null=True)
    weakest_family = serializers.CharField(allow_null=True)
    weakest_family_reason = serializers.CharField(
        required=False,
        help_text="Why this family is the weakest; ties on the basis go to the lower accuracy "
        "bound at the basis, then the smaller point ECL, then the name.",
    )
    proposed_limit_tokens = serializers.IntegerField(allow_null=True)
    proposal = serializers.DictField()
    strata = serializers.ListField(child=serializers.IntegerField())
    params = serializers.DictField(help_text="Every parameter the analysis used.")


class AnalysisPendingSerializer(serializers.Serializer):
    """202 from results (or 409 from a proposal) while the analysis job runs."""

    qualification = serializers.IntegerField()
    data_version = serializers.IntegerField(help_text="The trial version being analysed.")
    status = serializers.ChoiceField(choices=["pending"])
    detail = serializers.CharField()
    job = JobSerializer(help_text="Poll it at `job.url`; ask for the results again when it ends.")
    code = serializers.CharField(
        required=False, help_text="`analysis_pending`, on the 409 from a proposal only."
    )


# --- operating limits ------------------------------------------------------------------


class StageBudgetSerializer(serializers.Serializer):
    key = serializers.SlugField(max_length=64)
    label = serializers.CharField(required=False, allow_blank=True, max_length=200)
    max_tokens = serializers.IntegerField(min_value=1)
    target_tokens = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    action = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="What to do when over: " + ", ".join(RESERVE_ACTIONS) + ".",
    )


class LimitValuesSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    max_context_tokens = serializers.IntegerField(min_value=1, required=False)
    max_initial_assembly_tokens = serializers.IntegerField(min_value=0, required=False)
    reserve_tokens = serializers.IntegerField(min_value=0, required=False)
    reserve_action = serializers.ChoiceField(choices=ReserveAction.choices, required=False)
    source_limits = serializers.DictField(
        child=serializers.IntegerField(min_value=0), required=False
    )
    stage_budgets = StageBudgetSerializer(many=True, required=False)
    rationale = serializers.CharField(required=False, allow_blank=True)


class LimitProposeSerializer(LimitValuesSerializer):
    qualification = serializers.IntegerField()
    use_stage_template = serializers.BooleanField(
        default=False, help_text="Start from seed 004's five stage budgets."
    )


class LimitApproveSerializer(serializers.Serializer):
    confirm = serializers.BooleanField(
        required=False,
        default=False,
        help_text=f"Required, and must be true: “{APPROVAL_CONFIRMATION}” (the limit's "
        "`justification` and its `review.changes` with `flagged: true`). Without it: 400.",
    )
    comment = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=COMMENT_MAX_CHARS,
        help_text="Optional. Kept in the audit log entry of the approval and shown on the limit.",
    )
    reviewed = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Optional: the `review.digest` you read. If the limit or what it is compared "
        "with changed since, the approval is refused with 409 `review_stale`.",
    )


class LimitChangeSerializer(serializers.Serializer):
    field = serializers.CharField(help_text='e.g. "stage_budgets.plan.max_tokens"')
    label = serializers.CharField()
    kind = serializers.ChoiceField(choices=["removed", "loosened", "tightened", "added", "changed"])
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    flagged = serializers.BooleanField(help_text="Removed or loosened: confirm before approving.")
    text = serializers.CharField(help_text='e.g. "removed: stage `plan` budget 40K"')


class LimitReviewSerializer(serializers.Serializer):
    compared_with = serializers.IntegerField(
        allow_null=True,
        help_text="The limit this one supersedes or, for a proposal that supersedes none, the "
        "active limit of the same model; null when there is none.",
    )
    changes = LimitChangeSerializer(many=True)


class OperatingLimitSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None)
    approved_by = serializers.CharField(source="approved_by.username", default=None)
    requalification = serializers.SerializerMethodField()
    review = serializers.SerializerMethodField()
    approval_comment = serializers.SerializerMethodField()

    class Meta:
        model = OperatingLimit
        fields = [
            "id", "name", "status", "qualification", "configuration_fingerprint",
            "max_context_tokens", "max_initial_assembly_tokens", "reserve_tokens",
            "reserve_action", "source_limits", "stage_budgets", "rationale", "justification",
            "supersedes", "created_by", "approved_by", "approved_at", "created_at",
            "updated_at", "requalification", "review", "approval_comment",
        ]  # fmt: skip

    @extend_schema_field(LimitReviewSerializer)
    def get_review(self, limit) -> dict:
        review = selectors.limit_review(limit=limit)
        return {
            "compared_with": review.baseline.pk if review.baseline else None,
            "changes": [change.as_dict() for change in review.changes],
            "digest": selectors.limit_review_digest(limit=limit, review=review),
        }

    def get_approval_comment(self, limit) -> str | None:
        """The approving reviewer's comment, from the audit log; null until approved."""
        approval = selectors.limit_approval(limit=limit)
        return approval.data.get("comment", "") if approval else None

    def get_requalification(self, limit) -> dict:
        status = selectors.requalification_status(
            limit=limit, latest_memo=self.context.setdefault("latest_qualifications", {})
        )
        return {
            "due": status.due,
            "latest_qualification": status.latest.pk if status.latest else None,
            "changes": [
                {"field": field, "before": before, "after": after}
                for field, before, after in status.changes
            ],
            "successor": status.successor.pk if status.successor else None,
        }


# --- budget checks ------------------------------------------------------------------------


class OmissionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["omitted", "truncated", "summarised"])
    source = serializers.CharField(required=False)
    item = serializers.CharField(required=False, help_text="e.g. a file path")
    tokens = serializers.IntegerField(min_value=0, required=False)
    reason = serializers.CharField(required=False)


class BudgetCheckInputSerializer(serializers.Serializer):
    operating_limit = serializers.IntegerField()
    stage = serializers.CharField(required=False, allow_blank=True, max_length=64)
    allocation = serializers.DictField(
        child=serializers.IntegerField(min_value=0), help_text="Tokens by source."
    )
    assembled_prompt = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False
    )
    omissions = serializers.ListField(
        child=serializers.JSONField(),
        required=False,
        help_text="Truncation or omission decisions: objects like {decision, source, item, "
        "tokens, reason}, or sentences.",
    )
    run_ref = serializers.CharField(required=False, allow_blank=True, max_length=200)


class OverSourceSerializer(serializers.Serializer):
    source = serializers.CharField()
    tokens = serializers.IntegerField()
    limit = serializers.IntegerField()


class BudgetCheckSerializer(serializers.ModelSerializer):
    """The verdict (verdict, total, limit, reserve_left, over_sources, action) and the audit."""

    over_sources = OverSourceSerializer(many=True)
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = AssemblyAudit
        fields = [
            "id", "verdict", "total", "limit", "reserve_left", "over_sources", "action",
            "operating_limit", "stage", "allocation", "reasons", "unbudgeted_sources",
            "above_target", "omissions", "run_ref", "prompt_chars", "prompt_sha256",
            "source", "created_by", "created_at",
        ]  # fmt: skip


class BudgetCheckDetailSerializer(BudgetCheckSerializer):
    class Meta(BudgetCheckSerializer.Meta):
        fields = [*BudgetCheckSerializer.Meta.fields, "assembled_prompt"]


# --- the active limit for a harness's model -------------------------------------------------


class ActiveLimitValuesSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    model_name = serializers.CharField()
    model_version = serializers.CharField()
    workload = serializers.CharField()
    max_context_tokens = serializers.IntegerField()
    reserve_tokens = serializers.IntegerField()
    reserve_action = serializers.CharField()
    approved_at = serializers.DateTimeField()
    consequence = serializers.CharField()
    qualification = serializers.IntegerField()
    weakest_family = serializers.CharField(allow_null=True)
    ecl_tokens = serializers.IntegerField(
        allow_null=True, help_text="The weakest family's ECL: the qualified effective length."
    )
    ecl_text = serializers.CharField(allow_blank=True, help_text="e.g. '≥ 128k' when all passed.")
    ecl_lower95_tokens = serializers.IntegerField(allow_null=True)


class ActiveLimitSerializer(serializers.Serializer):
    model_id = serializers.CharField()
    version = serializers.CharField(help_text="Changes whenever the answer changes; cache by it.")
    candidates = serializers.IntegerField(
        help_text="Approved limits of this model (one per workload); the strictest is returned."
    )
    limit = ActiveLimitValuesSerializer(allow_null=True)

    @staticmethod
    def from_active(active) -> dict:
        limit = active.limit
        family = active.weakest_family or {}
        values = None
        if limit is not None:
            qualification = limit.qualification
            values = {
                "id": limit.pk,
                "name": limit.name,
                "model_name": qualification.configuration.model_name,
                "model_version": qualification.configuration.model_version,
                "workload": qualification.workload.name,
                "max_context_tokens": limit.max_context_tokens,
                "reserve_tokens": limit.reserve_tokens,
                "reserve_action": limit.reserve_action,
                "approved_at": limit.approved_at,
                "consequence": qualification.consequence,
                "qualification": qualification.pk,
                "weakest_family": family.get("family"),
                "ecl_tokens": family.get("ecl_tokens"),
                "ecl_text": family.get("ecl_text") or "",
                "ecl_lower95_tokens": family.get("ecl_lower95_tokens"),
            }
        return ActiveLimitSerializer(
            {
                "model_id": active.model_id,
                "version": active.version,
                "candidates": active.candidates,
                "limit": values,
            }
        ).data
