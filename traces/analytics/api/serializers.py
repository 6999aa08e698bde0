"""Serializers for the analytics API."""

from rest_framework import serializers


class CycleRequestSerializer(serializers.Serializer):
    post_compaction_tokens = serializers.FloatField(
        help_text="S: context right after a compaction."
    )
    growth_per_step = serializers.FloatField(help_text="D: context added per step; must be > 0.")
    summary_tokens = serializers.FloatField(help_text="SUMM: size of the compaction summary.")
    penalty_steps = serializers.FloatField(
        help_text="P: steps lost to rediscovery after each compaction; ≥ 0."
    )
    thresholds = serializers.ListField(
        child=serializers.FloatField(),
        required=False,
        default=list,
        help_text="Thresholds T at which to report f(T)/f(T*); each must exceed S.",
    )
    points = serializers.IntegerField(required=False, default=200, min_value=10, max_value=2000)


class CycleResponseSerializer(serializers.Serializer):
    optimum_threshold = serializers.FloatField()
    optimum_cost_per_step = serializers.FloatField()
    within_10pct = serializers.ListField(child=serializers.FloatField())
    floor_threshold = serializers.FloatField()
    curve = serializers.ListField(child=serializers.ListField(child=serializers.FloatField()))
    ratios = serializers.DictField(child=serializers.FloatField())


class AnalyticsEnvelopeSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "computing"])
    stale = serializers.BooleanField(required=False)
    data_version = serializers.IntegerField(required=False)
    computed_at = serializers.DateTimeField(required=False)
    filters = serializers.DictField(required=False)
    n_calls = serializers.IntegerField(required=False)
    result = serializers.JSONField(required=False)
    job_url = serializers.CharField(required=False)
