"""Public list prices, the seed of a workspace's first price table. Pure data: no Django.

These are the providers' published standard-tier list prices as this table was written
(`AS_OF`), in US dollars per million tokens. They were entered by hand, not fetched: check
them against the providers' pages before relying on a figure, and edit the workspace's table
(each edit is a new version) when they differ or when your contract prices differ.

Not modelled: Anthropic's higher rates for prompts over 200k tokens on the 1M-context
Sonnet models, batch and priority tiers, OpenAI's flex and priority tiers, and regional or
cloud-marketplace prices. OpenAI charges no cache write: its cache-write rates are the input
rate, so a write (which Codex does not report) costs what fresh input costs.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

AS_OF = date(2025, 11, 30)
ANTHROPIC_SOURCE = (
    "Anthropic list price, standard tier (claude.com/pricing and the prompt-caching docs: "
    "5-minute write 1.25× input, 1-hour write 2× input, read 0.1× input)"
)
OPENAI_SOURCE = (
    "OpenAI list price, standard tier (openai.com/api/pricing; cached input as cache read; "
    "no cache-write charge)"
)


def _anthropic(model: str, base: str, output: str, aliases=()) -> dict:
    rate = Decimal(base)
    return {
        "model": model,
        "aliases": list(aliases),
        "input": rate,
        "output": Decimal(output),
        "cache_read": rate / 10,
        "cache_write_5m": rate * Decimal("1.25"),
        "cache_write_1h": rate * 2,
        "as_of": AS_OF,
        "source": ANTHROPIC_SOURCE,
    }


def _openai(model: str, base: str, cached: str, output: str, aliases=()) -> dict:
    rate = Decimal(base)
    return {
        "model": model,
        "aliases": list(aliases),
        "input": rate,
        "output": Decimal(output),
        "cache_read": Decimal(cached),
        "cache_write_5m": rate,
        "cache_write_1h": rate,
        "as_of": AS_OF,
        "source": OPENAI_SOURCE,
    }


LIST_PRICES: tuple[dict, ...] = (
    _anthropic("claude-opus-4-5", "5", "25", aliases=["claude-opus-4.5"]),
    _anthropic("claude-opus-4-1", "15", "75", aliases=["claude-opus-4.1"]),
    _anthropic("claude-opus-4", "15", "75", aliases=["claude-opus-4-0"]),
    _anthropic("claude-sonnet-4-5", "3", "15", aliases=["claude-sonnet-4.5"]),
    _anthropic("claude-sonnet-4", "3", "15", aliases=["claude-sonnet-4-0"]),
    _anthropic("claude-haiku-4-5", "1", "5", aliases=["claude-haiku-4.5"]),
    _anthropic("claude-3-5-haiku", "0.80", "4", aliases=["claude-3.5-haiku"]),
    _openai("gpt-5", "1.25", "0.125", "10"),
    _openai("gpt-5-codex", "1.25", "0.125", "10"),
    _openai("gpt-5-mini", "0.25", "0.025", "2"),
    _openai("o3", "2", "0.50", "8"),
    _openai("o4-mini", "1.10", "0.275", "4.40"),
    _openai("gpt-4.1", "2", "0.50", "8"),
)
