"""The dollar cost of a call, or of many calls of one model, from a price table. Pure: no Django.

Rates are US dollars per million tokens, one per token class: uncached input, output
(reasoning included), cache read, and cache write for 5 minutes or for 1 hour. A cost the
harness reported itself (telemetry `cost_usd`) overrides the table: `call_cost` returns the
figure with its source, "telemetry" or "price table vN".

Model names match a price when, after lower-casing and dropping a provider prefix
("anthropic/", "openai/", Bedrock's "anthropic."), the name equals the price's model or one
of its aliases, optionally followed by a release tag: a date ("-20250929", "-2025-04-14",
Vertex's "@20250929"), "-latest", and Bedrock's "-v1:0". So "claude-sonnet-4-20250514"
takes the price of "claude-sonnet-4", but "claude-sonnet-4-5" does not (it is its own model),
and neither does "gpt-5-mini" take the price of "gpt-5".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

import numfmt

MILLION = Decimal(1_000_000)
RATE_FIELDS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
TELEMETRY = "telemetry"
_PROVIDER_PREFIX = re.compile(r"^(?:.*/|anthropic\.|openai\.)")
_RELEASE_TAG = re.compile(r"^(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2}|latest))?(?:-v\d+(?::\d+)?)?$")


@dataclass(frozen=True)
class Rates:
    """US dollars per million tokens of each class."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write_5m: Decimal
    cache_write_1h: Decimal


@dataclass(frozen=True)
class ModelPrice:
    model: str
    rates: Rates
    aliases: tuple[str, ...] = ()

    def names(self) -> tuple[str, ...]:
        return (self.model.lower(), *(a.lower() for a in self.aliases))


@dataclass(frozen=True)
class PriceTable:
    """One version of a workspace's price table; `saved` is its date (ISO), when known."""

    version: int
    prices: tuple[ModelPrice, ...]
    saved: str = ""

    @property
    def source(self) -> str:
        return f"price table v{self.version}"

    def price_for(self, model: str) -> ModelPrice | None:
        return match_price(model, self.prices)


@dataclass(frozen=True)
class Usage:
    """Token counts of one call or a sum over calls. Output includes reasoning."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0


@dataclass(frozen=True)
class Cost:
    """A dollar figure and where it came from; `usd` is None when nothing could price it."""

    usd: Decimal | None
    source: str  # "telemetry", "price table vN", or "no price"


NO_PRICE = "no price"


def normalise_model(name: str) -> str:
    return _PROVIDER_PREFIX.sub("", (name or "").strip().lower())


def match_price(model: str, prices: tuple[ModelPrice, ...] | list[ModelPrice]) -> ModelPrice | None:
    """The price whose model or alias `model` names, allowing a release tag after it.

    An exact name wins over a tagged one; among tagged matches the longest name wins.
    """
    name = normalise_model(model)
    if not name:
        return None
    best: tuple[int, ModelPrice] | None = None
    for price in prices:
        for candidate in price.names():
            if name == candidate:
                return price
            tagged = name.startswith(candidate) and _RELEASE_TAG.match(name[len(candidate) :])
            if tagged and (best is None or len(candidate) > best[0]):
                best = (len(candidate), price)
    return best[1] if best else None


def usage_cost(usage: Usage, rates: Rates) -> Decimal:
    """Dollars for the token counts at the rates (per million tokens)."""
    total = (
        usage.input * rates.input
        + usage.output * rates.output
        + usage.cache_read * rates.cache_read
        + usage.cache_write_5m * rates.cache_write_5m
        + usage.cache_write_1h * rates.cache_write_1h
    )
    return total / MILLION


def call_cost(
    *, model: str, usage: Usage, table: PriceTable | None, telemetry_usd: Decimal | None = None
) -> Cost:
    """The cost of one call: the harness's own figure when it sent one, else the table's."""
    if telemetry_usd is not None:
        return Cost(Decimal(telemetry_usd), TELEMETRY)
    price = table.price_for(model) if table else None
    if price is None:
        return Cost(None, NO_PRICE)
    return Cost(usage_cost(usage, price.rates), table.source)


@dataclass(frozen=True)
class UsageGroup:
    """Calls of one model summed. `telemetry_usd` is set when every call of the group carried
    its own cost (the sum of them); such a group is not priced from the table."""

    model: str
    calls: int
    usage: Usage
    telemetry_usd: Decimal | None = None


@dataclass
class ModelCost:
    model: str
    calls: int
    tokens: int
    usd: Decimal | None
    source: str
    priced_as: str = ""  # the price table's model name the calls matched


@dataclass
class CostSummary:
    """The cost of a set of calls: the priced total, by model, and what could not be priced."""

    usd: Decimal  # priced calls only; see `unpriced_calls`
    calls: int
    priced_calls: int
    telemetry_calls: int
    table_calls: int
    priced_tokens: int = 0  # tokens billed by the priced calls
    by_model: list[ModelCost] = field(default_factory=list)
    unpriced_models: list[str] = field(default_factory=list)
    table_version: int | None = None
    telemetry_usd: Decimal = Decimal(0)  # the part of `usd` the harness reported itself
    table_usd: Decimal = Decimal(0)  # the part priced from the table
    table_saved: str = ""  # the date of the table version

    @property
    def telemetry_share(self) -> float | None:
        """The share of the priced dollars that came from telemetry (None without dollars)."""
        if not self.usd:
            return None
        return float(self.telemetry_usd / self.usd)

    @property
    def split_text(self) -> str:
        """Where the dollars came from, e.g. "80.0% from telemetry (12 calls), 20.0% from
        price table v3 (2026-11-01) (30 calls)"."""
        return split_text(self)

    @property
    def unpriced_calls(self) -> int:
        return self.calls - self.priced_calls

    @property
    def usd_per_million_tokens(self) -> Decimal | None:
        """The blended rate of the priced calls: their dollars per million tokens billed."""
        if not self.priced_tokens:
            return None
        return self.usd * MILLION / self.priced_tokens

    @property
    def complete(self) -> bool:
        return self.calls > 0 and self.unpriced_calls == 0

    @property
    def sources(self) -> list[str]:
        names = []
        if self.telemetry_calls:
            names.append(TELEMETRY)
        if self.table_calls and self.table_version is not None:
            names.append(f"price table v{self.table_version}")
        return names

    @property
    def source(self) -> str:
        return " + ".join(self.sources) or NO_PRICE


def summarise(groups: list[UsageGroup], table: PriceTable | None) -> CostSummary:
    """Price groups of calls (cost is linear in tokens, so a group prices as one call).

    A telemetry group takes its own figure; any other group is priced from the table when its
    model has a price, and is counted unpriced otherwise (never as $0).
    """
    summary = CostSummary(
        usd=Decimal(0), calls=0, priced_calls=0, telemetry_calls=0, table_calls=0,
        table_version=table.version if table else None, table_saved=table.saved if table else "",
    )  # fmt: skip
    merged: dict[str, ModelCost] = {}
    unpriced: dict[str, int] = {}
    for group in groups:
        summary.calls += group.calls
        tokens = sum(getattr(group.usage, name) for name in RATE_FIELDS)
        cost = call_cost(
            model=group.model, usage=group.usage, table=table, telemetry_usd=group.telemetry_usd
        )
        if cost.usd is None:
            unpriced[group.model] = unpriced.get(group.model, 0) + group.calls
        else:
            summary.usd += cost.usd
            summary.priced_calls += group.calls
            summary.priced_tokens += tokens
            if cost.source == TELEMETRY:
                summary.telemetry_calls += group.calls
                summary.telemetry_usd += cost.usd
            else:
                summary.table_calls += group.calls
                summary.table_usd += cost.usd
        price = table.price_for(group.model) if table and cost.source != TELEMETRY else None
        row = merged.get(group.model)
        if row is None:
            merged[group.model] = ModelCost(
                group.model,
                group.calls,
                tokens,
                cost.usd,
                cost.source,
                price.model if price else "",
            )
            continue
        row.calls += group.calls
        row.tokens += tokens
        row.usd = None if row.usd is None or cost.usd is None else row.usd + cost.usd
        if cost.source not in row.source.split(" + "):
            row.source = f"{row.source} + {cost.source}"
        row.priced_as = row.priced_as or (price.model if price else "")
    # The model with the most unpriced calls first: it is the one worth pricing.
    summary.unpriced_models = sorted(unpriced, key=lambda m: (-unpriced[m], m))
    summary.by_model = sorted(
        merged.values(), key=lambda m: (m.usd is None, -(m.usd or 0), m.model)
    )
    return summary


def _share(part: Decimal, whole: Decimal) -> str:
    return numfmt.percent(float(part / whole))


def split_text(summary: CostSummary) -> str:
    """The sources of a summary's dollars with their shares of them and their call counts."""
    if not summary.priced_calls:
        return NO_PRICE
    parts = []
    whole = summary.usd
    for usd, calls, name in (
        (summary.telemetry_usd, summary.telemetry_calls, TELEMETRY),
        (summary.table_usd, summary.table_calls, _table_name(summary)),
    ):
        if not calls:
            continue
        share = _share(usd, whole) if whole else "–"
        parts.append(f"{share} from {name} ({numfmt.count(calls)} call{'s' if calls != 1 else ''})")
    return ", ".join(parts)


def _table_name(summary: CostSummary) -> str:
    name = f"price table v{summary.table_version}"
    return f"{name} ({summary.table_saved})" if summary.table_saved else name


def dollars_for_tokens(tokens: float, summary: CostSummary | None) -> Decimal | None:
    """Tokens priced at the summary's blended rate (its priced dollars per token billed):
    for a model's token figure, such as the what-if calculator's tokens per step."""
    rate = summary.usd_per_million_tokens if summary else None
    if rate is None:
        return None
    return Decimal(str(tokens)) * rate / MILLION
