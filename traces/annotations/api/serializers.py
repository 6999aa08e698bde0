"""Input and output shapes of the annotations API."""

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.api.serializers import NamedChoiceField
from traces.annotations.analysis.classes import CONFIDENCES, FAILURE_CLASSES, class_label
from traces.annotations.models import AnnotationQueue, Divergence, MarkKind, QueueStatus

CLASS_ERROR = "Unknown class '{input}'. Use one of: " + ", ".join(FAILURE_CLASSES) + "."
CONFIDENCE_ERROR = "Unknown confidence '{input}'. Use one of: " + ", ".join(CONFIDENCES) + "."


def class_field(**kwargs) -> NamedChoiceField:
    return NamedChoiceField(
        choices=list(FAILURE_CLASSES),
        enum_name="DivergenceClassEnum",
        error_messages={"invalid_choice": CLASS_ERROR},
        **kwargs,
    )


def confidence_field(**kwargs) -> NamedChoiceField:
    return NamedChoiceField(
        choices=list(CONFIDENCES),
        enum_name="DivergenceConfidenceEnum",
        error_messages={"invalid_choice": CONFIDENCE_ERROR},
        **kwargs,
    )


class DivergenceInputSerializer(serializers.Serializer):
    session = serializers.IntegerField(help_text="Trace session id.")
    agent = serializers.IntegerField(
        required=False, allow_null=True, help_text="Agent id; null to take the call's agent."
    )
    run = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Optional: the run you are reading; a call outside it is refused.",
    )
    call_index = serializers.IntegerField(
        min_value=0, help_text="0-based position of the call in the session's ordered calls."
    )
    failure_class = class_field()
    other_text = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="What went wrong, for class 'other'. Absent or blank, the note is used "
        "(its first 500 characters); 400 when both are empty.",
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=5000)
    evidence_call_indexes = serializers.ListField(
        child=serializers.IntegerField(min_value=0),
        required=False,
        default=list,
        max_length=50,
        help_text="Call indexes of earlier steps that show why (e.g. the forgotten constraint).",
    )
    confidence = confidence_field()


class AdjudicationInputSerializer(serializers.Serializer):
    run = serializers.IntegerField(help_text="The run to settle.")
    adopt = serializers.IntegerField(
        required=False, allow_null=True, help_text="Adopt this current mark as final."
    )
    call_index = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    failure_class = class_field(required=False)
    other_text = serializers.CharField(required=False, allow_blank=True, max_length=500)
    note = serializers.CharField(required=False, allow_blank=True, max_length=5000)
    evidence_call_indexes = serializers.ListField(
        child=serializers.IntegerField(min_value=0), required=False, default=list, max_length=50
    )
    confidence = confidence_field(required=False)

    def validate(self, attrs):
        if attrs.get("adopt") is None:
            missing = [
                f for f in ("call_index", "failure_class", "confidence") if attrs.get(f) is None
            ]
            if missing:
                raise serializers.ValidationError(
                    {f: "Required unless you adopt a mark." for f in missing}
                )
        return attrs


class DivergenceSerializer(serializers.ModelSerializer):
    kind = NamedChoiceField(
        choices=MarkKind.choices, enum_name="DivergenceKindEnum", read_only=True
    )
    failure_class = class_field(read_only=True)
    confidence = confidence_field(read_only=True)
    annotator = serializers.CharField(source="annotator.username")
    failure_class_label = serializers.SerializerMethodField()
    current = serializers.BooleanField(source="is_current")
    replaces = serializers.PrimaryKeyRelatedField(read_only=True)
    viewer_url = serializers.SerializerMethodField()

    class Meta:
        model = Divergence
        fields = [
            "id", "kind", "session", "agent", "run", "annotator", "call_index", "agent_index",
            "failure_class", "failure_class_label", "other_text", "note", "evidence_call_indexes",
            "confidence", "context_tokens", "model", "current", "replaces", "replaced_at",
            "based_on", "created_at", "viewer_url",
        ]  # fmt: skip

    def get_failure_class_label(self, mark) -> str:
        return class_label(mark.failure_class)

    def get_viewer_url(self, mark) -> str:
        path = reverse(
            "annotations:run_viewer", args=[mark.workspace.slug, mark.session_id, mark.run_id]
        )
        return f"{path}?at={mark.call_index}#step-{mark.call_index}"


class RunAgreementSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    window = serializers.IntegerField()
    marks = DivergenceSerializer(many=True)
    final = DivergenceSerializer(allow_null=True)
    n = serializers.IntegerField()
    steps = serializers.ListField(child=serializers.IntegerField())
    step_spread = serializers.IntegerField(allow_null=True)
    same_step = serializers.BooleanField(allow_null=True)
    within_window = serializers.BooleanField(allow_null=True)
    class_counts = serializers.DictField(child=serializers.IntegerField())
    same_class = serializers.BooleanField(allow_null=True)
    majority_class = serializers.CharField(allow_null=True)


class BandSerializer(serializers.Serializer):
    lower = serializers.IntegerField()
    upper = serializers.IntegerField()
    label = serializers.CharField()
    n = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField())


class ClassSerializer(serializers.Serializer):
    slug = serializers.CharField()
    label = serializers.CharField()
    total = serializers.IntegerField()


class DivergenceByBandSerializer(serializers.Serializer):
    band_width = serializers.IntegerField()
    basis = serializers.CharField(help_text="resolved (one per run) or marks (every mark).")
    window = serializers.IntegerField(help_text="Steps within ±N agree when resolving a run.")
    n = serializers.IntegerField(help_text="Divergences counted.")
    runs = serializers.IntegerField(help_text="Runs with at least one current mark.")
    disputed_runs = serializers.IntegerField(help_text="Runs left out until adjudicated.")
    resolution = serializers.DictField(child=serializers.IntegerField())
    classes = ClassSerializer(many=True)
    bands = BandSerializer(many=True)


class DistributionSerializer(serializers.Serializer):
    n = serializers.IntegerField()
    minimum = serializers.IntegerField(allow_null=True)
    p10 = serializers.FloatField(allow_null=True)
    q1 = serializers.FloatField(allow_null=True)
    median = serializers.FloatField(allow_null=True)
    q3 = serializers.FloatField(allow_null=True)
    p90 = serializers.FloatField(allow_null=True)
    maximum = serializers.IntegerField(allow_null=True)
    median_ci = serializers.ListField(child=serializers.IntegerField(), allow_null=True)
    median_ci_level = serializers.FloatField(allow_null=True)


class LabComparisonSerializer(serializers.Serializer):
    model = serializers.CharField()
    qualification = serializers.DictField(allow_null=True)
    verdict = serializers.CharField(
        help_text="earlier, inconclusive, consistent, insufficient, no_reference or "
        "no_qualification."
    )
    statement = serializers.CharField()
    reference_kind = serializers.CharField(allow_blank=True)
    reference_tokens = serializers.IntegerField(allow_null=True)
    family = serializers.CharField(allow_null=True)
    below_reference = serializers.IntegerField()
    distribution = DistributionSerializer()
    contexts = serializers.ListField(child=serializers.IntegerField())


class QueueSerializer(serializers.ModelSerializer):
    status = NamedChoiceField(
        choices=QueueStatus.choices, enum_name="AnnotationQueueStatusEnum", read_only=True
    )
    created_by = serializers.CharField(source="created_by.username", default=None)
    annotators = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = AnnotationQueue
        fields = [
            "id", "name", "status", "criteria", "matched_runs", "sample_size", "seed",
            "annotators_per_run", "agreement_window", "annotators", "created_by", "created_at",
            "url",
        ]  # fmt: skip

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_annotators(self, queue):
        return sorted(m.user.username for m in queue.members.select_related("user"))

    def get_url(self, queue) -> str:
        return reverse("annotations:queue_detail", args=[queue.workspace.slug, queue.pk])


class QueueCriteriaSerializer(serializers.Serializer):
    project = serializers.CharField(required=False, allow_blank=True)
    model = serializers.CharField(required=False, allow_blank=True)
    harness = serializers.CharField(required=False, allow_blank=True)
    task_type = serializers.CharField(required=False, allow_blank=True)
    agent_kind = serializers.CharField(required=False, allow_blank=True)
    min_context = serializers.IntegerField(required=False, min_value=0)
    max_context = serializers.IntegerField(required=False, min_value=0)
    min_calls = serializers.IntegerField(required=False, min_value=0)
    started_after = serializers.DateField(required=False)
    started_before = serializers.DateField(required=False)
    unmarked = serializers.BooleanField(required=False)


class QueueBuildSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    filter = QueueCriteriaSerializer(required=False, default=dict)
    sample_size = serializers.IntegerField(min_value=1, max_value=1000)
    annotators = serializers.ListField(
        child=serializers.CharField(), min_length=1, help_text="Usernames (editor role or higher)."
    )
    annotators_per_run = serializers.IntegerField(min_value=1, max_value=10, default=2)
    agreement_window = serializers.IntegerField(min_value=0, max_value=1000, default=3)
    seed = serializers.IntegerField(required=False, min_value=1, max_value=2**62)


class KappaSerializer(serializers.Serializer):
    method = serializers.CharField(help_text="cohen, fleiss, or empty when not computable.")
    kappa = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    ci_method = serializers.CharField()
    observed_agreement = serializers.FloatField(allow_null=True)
    items = serializers.IntegerField()
    excluded_items = serializers.IntegerField()
    ratings_per_item = serializers.IntegerField()
    raters = serializers.IntegerField()
    categories = serializers.ListField(child=serializers.CharField())
    interpretation = serializers.CharField()
    reason = serializers.CharField()


class StepAgreementSerializer(serializers.Serializer):
    items = serializers.IntegerField()
    same_step = serializers.IntegerField()
    within_window = serializers.IntegerField()
    window = serializers.IntegerField()
    same_step_ci = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    within_window_ci = serializers.ListField(child=serializers.FloatField(), allow_null=True)


class QueueDetailSerializer(QueueSerializer):
    progress = serializers.SerializerMethodField()
    kappa = serializers.SerializerMethodField()
    step_agreement = serializers.SerializerMethodField()

    class Meta(QueueSerializer.Meta):
        fields = [*QueueSerializer.Meta.fields, "progress", "kappa", "step_agreement"]

    @extend_schema_field(serializers.DictField())
    def get_progress(self, queue):
        progress = self.context["progress"]
        return {
            "items": progress.items,
            "places": progress.places,
            "finished": progress.finished,
            "assigned": progress.assigned,
            "complete_items": progress.complete_items,
            "by_annotator": [
                {k: (v.username if k == "user" else v) for k, v in row.items()}
                for row in progress.by_annotator
            ],
        }

    @extend_schema_field(KappaSerializer)
    def get_kappa(self, queue):
        kappa = self.context["agreement"].kappa
        return KappaSerializer({**kappa.__dict__, "interpretation": kappa.interpretation}).data

    @extend_schema_field(StepAgreementSerializer)
    def get_step_agreement(self, queue):
        return StepAgreementSerializer(self.context["agreement"].steps.__dict__).data


class RunBriefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    session = serializers.IntegerField(source="session_id")
    agent = serializers.IntegerField(source="agent_id")
    index = serializers.IntegerField()
    first_call_index = serializers.IntegerField()
    last_call_index = serializers.IntegerField()
    call_count = serializers.IntegerField()
    max_context = serializers.IntegerField()


class AssignmentSerializer(serializers.Serializer):
    queue = serializers.IntegerField()
    position = serializers.IntegerField(help_text="The run's place in the queue (0-based).")
    run = RunBriefSerializer()
    assigned_at = serializers.DateTimeField()
    viewer_url = serializers.CharField()


class QueueFinishSerializer(serializers.Serializer):
    outcome = NamedChoiceField(
        choices=["no_divergence", "skip"],
        enum_name="QueueFinishOutcomeEnum",
        help_text="no_divergence: you read the run and nothing went wrong; skip: give it back.",
    )
    run = serializers.IntegerField(required=False, help_text="Defaults to your open run.")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)


class QueueStatusSerializer(serializers.Serializer):
    status = NamedChoiceField(choices=QueueStatus.choices, enum_name="AnnotationQueueStatusEnum")
