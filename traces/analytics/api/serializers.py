"""Serializers for the analytics API."""

from rest_framework import serializers

from traces.analysis.cycle import MAX_GROWTH, MAX_PENALTY, MAX_TOKENS


class CycleRequestSerializer(serializers.Serializer):
    # Lower bounds (D > 0, P ≥ 0, S > 0, T > S) are the model's and answered by
    # CycleParams.validate; upper bounds keep every intermediate value finite.
    post_compaction_tokens = serializers.FloatField(
        max_value=MAX_TOKENS, help_text="S: context right after a compaction; > 0."
    )
    growth_per_step = serializers.FloatField(
        max_value=MAX_GROWTH, help_text="D: context added per step; must be > 0."
    )
    summary_tokens = serializers.FloatField(
        max_value=MAX_TOKENS, help_text="SUMM: size of the compaction summary; ≥ 0."
    )
    penalty_steps = serializers.FloatField(
        max_value=MAX_PENALTY, help_text="P: steps lost to rediscovery after each compaction; ≥ 0."
    )
    thresholds = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_TOKENS),
        required=False,
        default=list,
        max_length=100,
        help_text="Thresholds T (whole tokens) at which to report f(T)/f(T*); each must exceed S.",
    )
    points = serializers.IntegerField(required=False, default=200, min_value=10, max_value=2000)


class ThresholdRatioSerializer(serializers.Serializer):
    threshold = serializers.IntegerField()
    cost_per_step = serializers.FloatField(allow_null=True, help_text="f(T); null below the floor.")
    ratio = serializers.FloatField(allow_null=True, help_text="f(T)/f(T*); null below the floor.")
    below_floor = serializers.BooleanField(
        help_text="T ≤ S + P·D: the cycle returns no productive work, f(T) is undefined."
    )
    reason = serializers.CharField(allow_null=True)


class CycleResponseSerializer(serializers.Serializer):
    optimum_threshold = serializers.FloatField()
    optimum_cost_per_step = serializers.FloatField()
    within_10pct = serializers.ListField(child=serializers.FloatField())
    floor_threshold = serializers.FloatField()
    curve = serializers.ListField(child=serializers.ListField(child=serializers.FloatField()))
    ratios = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text='f(T)/f(T*) keyed by T in whole tokens ("1000000"); null below the floor.',
    )
    at_thresholds = ThresholdRatioSerializer(many=True)


class AnalyticsEnvelopeSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "computing", "failed"])
    stale = serializers.BooleanField(required=False)
    data_version = serializers.IntegerField(required=False)
    computed_at = serializers.DateTimeField(required=False)
    filters = serializers.DictField(required=False)
    n_calls = serializers.IntegerField(required=False)
    result = serializers.JSONField(required=False)
    failures = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="Each section of `result` the data cannot give (null there), with the reason.",
    )
    error = serializers.CharField(
        required=False, help_text="Why the computation on the current traces failed."
    )
    detail = serializers.CharField(required=False, help_text="What to do about a failure.")
    job_url = serializers.CharField(required=False)
