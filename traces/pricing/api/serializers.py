"""Input and output shapes of the prices API."""

from rest_framework import serializers

from traces.pricing.models import ModelPrice, PriceTableVersion

RATE = dict(max_digits=12, decimal_places=6, min_value=0, coerce_to_string=True)


class ModelPriceSerializer(serializers.ModelSerializer):
    input = serializers.DecimalField(
        source="input_rate", **RATE, help_text="Dollars per million uncached input tokens."
    )
    output = serializers.DecimalField(
        source="output_rate",
        **RATE,
        help_text="Dollars per million output tokens (reasoning included).",
    )
    cache_read = serializers.DecimalField(
        source="cache_read_rate", **RATE, help_text="Dollars per million cache-read tokens."
    )
    cache_write_5m = serializers.DecimalField(
        source="cache_write_5m_rate",
        **RATE,
        help_text="Dollars per million 5-minute cache-write tokens.",
    )
    cache_write_1h = serializers.DecimalField(
        source="cache_write_1h_rate",
        **RATE,
        help_text="Dollars per million 1-hour cache-write tokens.",
    )
    aliases = serializers.ListField(child=serializers.CharField(), help_text="Other names matched.")

    class Meta:
        model = ModelPrice
        fields = [
            "model", "aliases", "input", "output", "cache_read", "cache_write_5m",
            "cache_write_1h", "as_of", "source",
        ]  # fmt: skip


class PriceTableVersionSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None, read_only=True)
    prices = ModelPriceSerializer(many=True, read_only=True)

    class Meta:
        model = PriceTableVersion
        fields = ["id", "number", "note", "changes", "created_by", "created_at", "prices"]


class PriceTableVersionSummarySerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None, read_only=True)
    price_count = serializers.IntegerField(read_only=True, help_text="Models priced.")

    class Meta:
        model = PriceTableVersion
        fields = ["id", "number", "note", "changes", "created_by", "created_at", "price_count"]


class ModelPriceInputSerializer(serializers.Serializer):
    """One row; values are checked by the service, which names the row and field in errors."""

    model = serializers.CharField(help_text="e.g. claude-sonnet-4-5 (a date tag is matched).")
    aliases = serializers.ListField(child=serializers.CharField(), required=False, default=list)
    input = serializers.CharField(help_text='Dollars per million tokens, e.g. "3" or "0.30".')
    output = serializers.CharField()
    cache_read = serializers.CharField()
    cache_write_5m = serializers.CharField()
    cache_write_1h = serializers.CharField()
    as_of = serializers.CharField(help_text="YYYY-MM-DD: when these were the provider's price.")
    source = serializers.CharField(help_text="Where the rates come from.")


class PriceTableInputSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)
    prices = serializers.ListField(
        child=serializers.DictField(),
        help_text="Every model price of the new version (the whole table, not a change).",
    )


class ModelCostSerializer(serializers.Serializer):
    model = serializers.CharField()
    calls = serializers.IntegerField()
    tokens = serializers.IntegerField()
    usd = serializers.DecimalField(max_digits=20, decimal_places=6, allow_null=True)
    source = serializers.CharField(help_text='"telemetry", "price table vN" or "no price".')
    priced_as = serializers.CharField(help_text="The price table row the model matched.")


class CostSummarySerializer(serializers.Serializer):
    usd = serializers.DecimalField(
        max_digits=20, decimal_places=6, help_text="Priced calls only: see unpriced_calls."
    )
    source = serializers.CharField()
    calls = serializers.IntegerField()
    priced_calls = serializers.IntegerField()
    unpriced_calls = serializers.IntegerField()
    telemetry_calls = serializers.IntegerField()
    table_calls = serializers.IntegerField()
    table_version = serializers.IntegerField(allow_null=True)
    table_saved = serializers.CharField(help_text="The table version's date (YYYY-MM-DD).")
    telemetry_usd = serializers.DecimalField(
        max_digits=20, decimal_places=6, help_text="The part of usd the harness reported."
    )
    table_usd = serializers.DecimalField(
        max_digits=20, decimal_places=6, help_text="The part of usd priced from the table."
    )
    split = serializers.CharField(
        help_text='e.g. "80.0% from telemetry (12 calls), 20.0% from price table v3 '
        '(2026-11-01) (30 calls)".'
    )
    unpriced_models = serializers.ListField(child=serializers.CharField())
    by_model = ModelCostSerializer(many=True)


class SubagentCostRowSerializer(serializers.Serializer):
    query_source = serializers.CharField(help_text="From telemetry; empty without an event.")
    agent_name = serializers.CharField()
    kind = serializers.CharField(help_text="main, subagent, compaction or telemetry only.")
    start_kind = serializers.CharField(help_text="fresh, fork or unknown.")
    agents = serializers.IntegerField(allow_null=True)
    per_agent_usd = serializers.DecimalField(max_digits=20, decimal_places=6, allow_null=True)
    cost = CostSummarySerializer()


class SubagentCostSerializer(serializers.Serializer):
    rows = SubagentCostRowSerializer(many=True)
    total = CostSummarySerializer()
    telemetry_only_calls = serializers.IntegerField()
