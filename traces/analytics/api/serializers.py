"""Serializers for the analytics API."""

from rest_framework import serializers

from traces.analysis.cycle import MAX_GROWTH, MAX_PENALTY, MAX_SCENARIOS, MAX_TOKENS


class CycleScenarioSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=80, required=False, default="", allow_blank=True)
    threshold = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TOKENS,
        help_text="T: compact at this context; must exceed S + tail.",
    )
    preserved_tail_tokens = serializers.FloatField(
        min_value=0,
        max_value=MAX_TOKENS,
        required=False,
        default=0,
        help_text="Tail kept verbatim: the session lands at S + tail. 0 = the bare digest.",
    )
    penalty_steps = serializers.FloatField(
        min_value=0,
        max_value=MAX_PENALTY,
        help_text="P for this scenario (steps lost per compaction).",
    )
    disruption_steps = serializers.FloatField(
        min_value=0,
        max_value=MAX_PENALTY,
        required=False,
        allow_null=True,
        default=None,
        help_text="L for this scenario; default: the request's.",
    )


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
    preserved_tail_tokens = serializers.FloatField(
        min_value=0,
        max_value=MAX_TOKENS,
        required=False,
        default=0,
        help_text="Tail kept verbatim after each compaction: S becomes S + tail, and "
        "`penalty_steps` is the P with that tail. Default 0 (the bare digest).",
    )
    disruption_steps = serializers.FloatField(
        min_value=0,
        max_value=MAX_PENALTY,
        required=False,
        allow_null=True,
        default=None,
        help_text="L: steps after a compaction counted as degraded. Default: the workspace's "
        "measured `elevated_until_step` (behaviour after compaction, unfiltered), else 30.",
    )
    scenarios = CycleScenarioSerializer(
        many=True,
        required=False,
        max_length=MAX_SCENARIOS,
        help_text="Fixed scenarios compared side by side, each with its own threshold, tail "
        "and P (S, D and SUMM from the request); the first is the reference.",
    )


class ThresholdRatioSerializer(serializers.Serializer):
    threshold = serializers.IntegerField()
    cost_per_step = serializers.FloatField(allow_null=True, help_text="f(T); null below the floor.")
    ratio = serializers.FloatField(allow_null=True, help_text="f(T)/f(T*); null below the floor.")
    below_floor = serializers.BooleanField(
        help_text="T ≤ S + P·D: the cycle returns no productive work, f(T) is undefined."
    )
    reason = serializers.CharField(allow_null=True)
    steps_per_cycle = serializers.FloatField(help_text="n = (T − S)/D.")
    mean_window = serializers.FloatField(help_text="(S + T)/2: the window climbs from S to T.")
    degraded_share = serializers.FloatField(
        help_text="min(L, n)/n: share of all steps within L steps after a compaction."
    )


class DisruptionSerializer(serializers.Serializer):
    steps = serializers.FloatField(help_text="L used for `degraded_share`.")
    source = serializers.ChoiceField(
        choices=["given", "measured", "default"],
        help_text="given in the request; measured (the workspace's elevated_until_step, "
        "with its n); or the default 30 of seed 001 §7.3, with the reason.",
    )
    label = serializers.CharField()
    compactions = serializers.IntegerField(required=False, help_text="n behind a measured L.")
    operator_messages = serializers.IntegerField(required=False)
    phrase_list_version = serializers.IntegerField(required=False)
    stale = serializers.BooleanField(
        required=False, help_text="The measured L is from older traces than the current ones."
    )


class ScenarioResultSerializer(serializers.Serializer):
    name = serializers.CharField()
    threshold = serializers.IntegerField()
    preserved_tail_tokens = serializers.FloatField()
    post_compaction_tokens = serializers.FloatField(help_text="S + tail.")
    penalty_steps = serializers.FloatField()
    disruption_steps = serializers.FloatField()
    steps_per_cycle = serializers.FloatField()
    mean_window = serializers.FloatField()
    cost_per_step = serializers.FloatField(allow_null=True, help_text="f(T); null below the floor.")
    below_floor = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True)
    degraded_share = serializers.FloatField()
    cost_ratio_to_first = serializers.FloatField(allow_null=True)
    saving_vs_first = serializers.FloatField(
        allow_null=True, help_text="1 − f ÷ f(first scenario): 0.25 = costs 25% less."
    )


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
    post_compaction_tokens = serializers.FloatField(help_text="S the model used: S + tail.")
    preserved_tail_tokens = serializers.FloatField()
    disruption = DisruptionSerializer()
    scenarios = ScenarioResultSerializer(many=True, allow_null=True)


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
