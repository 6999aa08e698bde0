"""Serializers of the audit API."""

from __future__ import annotations

from rest_framework import serializers

from traces.annotations.analysis.classes import CONFIDENCES
from traces.audit.analysis.fractions import COUNTERFACTUALS
from traces.audit.models import Audit, JudgeKind


class AuditSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    job = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = Audit
        fields = [
            "id", "name", "status", "strata_sizes", "band_edges", "seed", "exclude_forks",
            "packet_count", "step_count", "job", "created_by", "created_at",
        ]  # fmt: skip


class AuditDetailSerializer(AuditSerializer):
    progress = serializers.SerializerMethodField()

    class Meta(AuditSerializer.Meta):
        fields = [*AuditSerializer.Meta.fields, "progress"]

    def get_progress(self, audit) -> dict:
        return self.context.get("progress", {})


class AuditCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    strata_sizes = serializers.DictField(
        child=serializers.JSONField(),
        help_text="Steps per stratum, keyed 'task_type|band' (the band of the step's own "
        'window), e.g. {"building|150k–350k": 30}.',
    )
    seed = serializers.IntegerField(required=False, min_value=0, max_value=2**62)
    band_edges = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False,
        help_text="Token edges of the bands (default 50k, 150k, 350k, 600k).",
    )  # fmt: skip
    exclude_forks = serializers.BooleanField(
        required=False, default=True,
        help_text="Leave out agents that started as forks of a loaded parent (start_kind = "
        "fork), as the analytics filter does. Default true.",
    )  # fmt: skip


class AuditJudgmentInputSerializer(serializers.Serializer):
    step = serializers.IntegerField(help_text="`step_id` from the packet.")
    judge_kind = serializers.ChoiceField(choices=JudgeKind.values, default=JudgeKind.LLM)
    judge_label = serializers.CharField(
        max_length=200, required=False, allow_blank=True,
        help_text="The LLM judge's model and prompt version (a person judges as themself).",
    )  # fmt: skip
    active_item_ids = serializers.ListField(
        child=serializers.JSONField(), help_text="Inventory numbers the step drew on."
    )
    helpful_item_ids = serializers.ListField(
        child=serializers.JSONField(), required=False, default=list,
        help_text="Inventory numbers that were merely helpful.",
    )  # fmt: skip
    verbatim_needed = serializers.BooleanField()
    counterfactual = serializers.ChoiceField(choices=list(COUNTERFACTUALS))
    confidence = serializers.ChoiceField(choices=list(CONFIDENCES))
    note = serializers.CharField(required=False, allow_blank=True, max_length=5000)


class AuditJudgmentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    audit_id = serializers.IntegerField()
    packet_id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    step_id = serializers.IntegerField()
    step_number = serializers.IntegerField()
    call_index = serializers.IntegerField()
    task_type = serializers.CharField()
    band = serializers.CharField()
    window_tokens = serializers.IntegerField()
    judge_kind = serializers.CharField()
    judge_label = serializers.CharField()
    active_item_ids = serializers.ListField(child=serializers.IntegerField())
    helpful_item_ids = serializers.ListField(child=serializers.IntegerField())
    active_tokens = serializers.IntegerField(help_text="Sum of the active items' tokens.")
    helpful_tokens = serializers.IntegerField()
    verbatim_needed = serializers.BooleanField()
    counterfactual = serializers.CharField()
    confidence = serializers.CharField()
    note = serializers.CharField()
    created_at = serializers.CharField()
    updated_at = serializers.CharField()


class AuditPacketSerializer(serializers.Serializer):
    """A judge packet (the whole JSON as stored, plus step ids)."""

    packet_id = serializers.IntegerField()
    audit_id = serializers.IntegerField()
    position = serializers.IntegerField()
    run_id = serializers.IntegerField()
    session_id = serializers.IntegerField()
    agent_id = serializers.IntegerField()
    task_type = serializers.CharField()
    band = serializers.CharField()
    directive = serializers.CharField()
    directive_source = serializers.CharField()
    summary = serializers.CharField(allow_null=True)
    summary_tokens = serializers.IntegerField(allow_null=True)
    summary_label = serializers.CharField()
    token_method = serializers.CharField()
    items = serializers.ListField(child=serializers.DictField())
    steps = serializers.ListField(child=serializers.DictField())
    counterfactual_question = serializers.CharField()
    counterfactual_classes = serializers.ListField(child=serializers.CharField())


class AuditResultsSerializer(serializers.Serializer):
    n_judgments = serializers.IntegerField()
    n_steps = serializers.IntegerField()
    basis = serializers.CharField()
    excluded_low_confidence = serializers.IntegerField()
    median_method = serializers.CharField()
    share_method = serializers.CharField()
    active_by_band = serializers.ListField(child=serializers.DictField())
    verbatim_by_task_type = serializers.ListField(child=serializers.DictField())
    verbatim_overall = serializers.DictField()
    counterfactual = serializers.ListField(child=serializers.DictField())
    counterfactual_question = serializers.CharField()
    agreement = serializers.DictField()


class AuditStrataSerializer(serializers.Serializer):
    bands = serializers.ListField(child=serializers.CharField())
    task_types = serializers.ListField(child=serializers.CharField())
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Per stratum 'task_type|band': the steps it can give (at most three from one "
        "run). A step's band is that of its own window.",
    )
    steps = serializers.DictField(
        child=serializers.IntegerField(), help_text="Per stratum: all its steps."
    )
    runs = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Per stratum: the runs with at least one step in it.",
    )
    exclude_forks = serializers.BooleanField(
        help_text="Whether agents that started as forks were left out of the counts."
    )
    total = serializers.IntegerField(help_text="The steps all strata can give.")
