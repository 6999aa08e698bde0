"""The pure cost computation and model-name matching, checked against hand arithmetic."""

from decimal import Decimal
from fractions import Fraction

import pytest

from traces.pricing.analysis.cost import (
    NO_PRICE,
    TELEMETRY,
    ModelPrice,
    PriceTable,
    Rates,
    Usage,
    UsageGroup,
    call_cost,
    dollars_for_tokens,
    match_price,
    summarise,
    usage_cost,
)
from traces.pricing.analysis.list_prices import LIST_PRICES


def table_of(version: int, prices: tuple[dict, ...] = LIST_PRICES) -> PriceTable:
    return PriceTable(
        version,
        tuple(
            ModelPrice(
                p["model"],
                Rates(
                    p["input"],
                    p["output"],
                    p["cache_read"],
                    p["cache_write_5m"],
                    p["cache_write_1h"],
                ),
                tuple(p["aliases"]),
            )
            for p in prices
        ),
    )


LIST = table_of(3)


def test_a_call_costs_each_token_class_at_its_own_rate():
    # Sonnet 4.5 list price: $3 in, $15 out, $0.30 read, $3.75 5-min write, $6 1-h write.
    usage = Usage(
        input=1200, output=800, cache_read=40_000, cache_write_5m=3000, cache_write_1h=1000
    )
    by_hand = (
        Fraction(1200 * 3) + Fraction(800 * 15) + Fraction(40_000 * 3, 10)
        + Fraction(3000 * 375, 100) + Fraction(1000 * 6)
    ) / 1_000_000  # fmt: skip
    cost = call_cost(model="claude-sonnet-4-5-20250929", usage=usage, table=LIST)
    assert Fraction(cost.usd) == by_hand == Fraction(44850, 1_000_000)
    assert cost.source == "price table v3"


def test_telemetry_cost_overrides_the_table():
    usage = Usage(input=10**6, output=10**6)
    cost = call_cost(
        model="claude-opus-4-1", usage=usage, table=LIST, telemetry_usd=Decimal("0.0123")
    )
    assert (cost.usd, cost.source) == (Decimal("0.0123"), TELEMETRY)
    # …even for a model the table does not price
    assert call_cost(model="mystery", usage=usage, table=LIST, telemetry_usd=Decimal(1)).usd == 1


def test_an_unknown_model_has_no_price_never_zero():
    cost = call_cost(model="claude-opus-9", usage=Usage(input=5), table=LIST)
    assert cost.usd is None and cost.source == NO_PRICE
    assert call_cost(model="gpt-5", usage=Usage(input=5), table=None).usd is None


@pytest.mark.parametrize(
    ("name", "priced_as"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-opus-4-5", "claude-opus-4-5"),
        ("Claude-Haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("gpt-5-codex", "gpt-5-codex"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("openai/gpt-5", "gpt-5"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("o4-mini", "o4-mini"),
        ("claude-sonnet-4.5", "claude-sonnet-4-5"),  # an alias
    ],
)
def test_model_names_match_by_name_alias_and_release_tag(name, priced_as):
    assert match_price(name, LIST.prices).model == priced_as


@pytest.mark.parametrize(
    "name",
    ["gpt-5-nano", "o3-mini", "gpt-5.1", "claude-opus-4-6", "gpt-4.1-mini", "", "<synthetic>"],
)
def test_a_variant_does_not_take_its_family_price(name):
    assert match_price(name, LIST.prices) is None


def test_list_prices_follow_the_published_multipliers():
    for price in LIST.prices:
        if price.model.startswith("claude"):
            assert price.rates.cache_write_5m == price.rates.input * Decimal("1.25")
            assert price.rates.cache_write_1h == price.rates.input * 2
            assert price.rates.cache_read == price.rates.input / 10
    opus = match_price("claude-opus-4-5", LIST.prices).rates
    assert (opus.input, opus.output) == (5, 25)
    assert usage_cost(Usage(output=10**6), match_price("gpt-5", LIST.prices).rates) == 10


def test_a_summary_sums_groups_and_keeps_the_unpriced_apart():
    groups = [
        UsageGroup("claude-sonnet-4-5", 2, Usage(input=1_000_000)),  # $3
        UsageGroup("claude-sonnet-4-5", 1, Usage(), telemetry_usd=Decimal("0.50")),
        UsageGroup("gpt-5", 4, Usage(output=100_000)),  # $1
        UsageGroup("my-local-model", 3, Usage(input=999)),
    ]
    summary = summarise(groups, LIST)
    assert summary.usd == Decimal("4.50")
    assert (summary.calls, summary.priced_calls, summary.unpriced_calls) == (10, 7, 3)
    assert (summary.telemetry_calls, summary.table_calls) == (1, 6)
    assert summary.unpriced_models == ["my-local-model"]
    assert summary.source == "telemetry + price table v3"
    assert not summary.complete
    rows = {row.model: row for row in summary.by_model}
    assert rows["claude-sonnet-4-5"].usd == Decimal("3.50")
    assert rows["claude-sonnet-4-5"].source == "price table v3 + telemetry"
    assert rows["my-local-model"].usd is None and rows["my-local-model"].source == NO_PRICE
    assert summary.by_model[-1].model == "my-local-model"  # unpriced last


def test_no_calls_is_no_cost_and_no_source():
    summary = summarise([], LIST)
    assert summary.usd == 0 and summary.calls == 0 and summary.source == NO_PRICE


def test_a_blended_rate_prices_a_token_figure():
    summary = summarise(
        [UsageGroup("gpt-5", 1, Usage(input=1_000_000, output=1_000_000))], LIST
    )  # $1.25 + $10 over 2M tokens
    assert summary.usd_per_million_tokens == Decimal("5.625")
    assert dollars_for_tokens(80_000, summary) == Decimal("0.45")
    assert dollars_for_tokens(80_000, summarise([], LIST)) is None
