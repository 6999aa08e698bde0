"""Shared by the telemetry readers: the constants, the bounds a value must keep, and the
reading of one attribute value into a column. No Django."""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

import orjson

# The personal data Claude Code and Codex attach to every record (user.account_id is
# Codex's and Claude Code's newer name for the account).
IDENTITY_KEYS = (
    "user.email",
    "user.account_uuid",
    "user.account_id",
    "user.id",
    "organization.id",
)
IDENTITY_SET = frozenset(IDENTITY_KEYS)
IDENTITY_KEEP, IDENTITY_HASH, IDENTITY_DROP = "keep", "hash", "drop"

# Bounds beyond which a value is a producer bug, not usage.
MAX_TOKENS = 10**11
MAX_COST_USD = 1_000_000
MAX_DURATION_MS = 7 * 24 * 3600 * 1000

CLAUDE_CODE, CODEX, OTLP = "claude-code", "codex", "otlp"
SESSION_KEYS = ("session.id", "conversation.id")

# Event names that are read into columns; any other name is kept as it came, and counted.
KNOWN_EVENTS = frozenset(
    {
        "claude_code.api_request",
        "claude_code.api_error",
        "claude_code.compaction",
        "claude_code.subagent_completed",
        "claude_code.tool_result",
        "claude_code.user_prompt",
        "codex.conversation_starts",
        "codex.sse_event",
    }
)
# Attributes that must be non-negative integers (counts, sizes, durations) when present.
COUNT_ATTRIBUTES = {
    "claude_code.api_request": ("input_tokens", "output_tokens", "cache_read_tokens",
                                "cache_creation_tokens", "duration_ms", "cost_usd_micros"),
    "claude_code.api_error": ("duration_ms", "attempt", "status_code"),
    "claude_code.compaction": ("duration_ms", "pre_tokens", "post_tokens"),
    "claude_code.subagent_completed": ("total_tokens", "total_tool_uses", "duration_ms"),
    "claude_code.tool_result": ("duration_ms", "tool_input_size_bytes", "tool_result_size_bytes"),
    "claude_code.user_prompt": ("prompt_length",),
    "codex.conversation_starts": ("context_window", "auto_compact_token_limit"),
    "codex.sse_event": ("input_token_count", "output_token_count", "cached_token_count",
                        "reasoning_token_count", "tool_token_count", "duration_ms"),
}  # fmt: skip
TOKEN_LIKE = ("token", "context_window", "auto_compact")

DELTA, CUMULATIVE = 1, 2
TEMPORALITY_NAMES = {DELTA: "delta", CUMULATIVE: "cumulative"}
# Metrics stored as time series, whatever their temporality: every Sum. These two must be
# Sums: a gauge or histogram under their name is rejected.
USAGE_METRICS = {"claude_code.token.usage": "tokens", "claude_code.cost.usage": "USD"}


class Rejected(ValueError):
    """One record cannot be stored; the message is the reason."""


def _any_value(value):
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else str(number)  # JSON has no NaN
    if kind == "bool_value":
        return value.bool_value
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return None


def attributes_dict(attributes) -> dict:
    return {kv.key: _any_value(kv.value) for kv in attributes}


def _limit(key: str) -> int | None:
    if key.endswith("duration_ms"):
        return MAX_DURATION_MS
    return MAX_TOKENS if any(part in key for part in TOKEN_LIKE) else None


def _int(attrs: dict, key: str) -> int | None:
    """A non-negative, plausible integer attribute, or None when absent."""
    value = attrs.get(key)
    if value is None or value == "":
        return None
    if type(value) is not int:
        value = _as_int(key, value)
    if value < 0:
        raise Rejected(f"attribute {key!r} is negative ({value})")
    limit = LIMITS[key] if key in LIMITS else _limit(key)
    if limit is not None and value > limit:
        raise Rejected(f"attribute {key!r} = {value:,} is not plausible (over {limit:,})")
    return value


def _as_int(key: str, value) -> int:
    if isinstance(value, str):
        try:
            value = float(value) if "." in value or "e" in value.lower() else int(value)
        except ValueError:
            raise Rejected(f"attribute {key!r} must be a number, got {value!r}") from None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise Rejected(f"attribute {key!r} must be a whole number, got {value!r}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Rejected(f"attribute {key!r} must be a number, got {value!r}")
    return value


LIMITS = {key: _limit(key) for keys in COUNT_ATTRIBUTES.values() for key in keys}


def _cost(attrs: dict) -> Decimal | None:
    """cost_usd (a double), else cost_usd_micros (integer 10⁻⁶ USD)."""
    raw = attrs.get("cost_usd")
    if raw is None or raw == "":
        micros = _int(attrs, "cost_usd_micros")
        return None if micros is None else Decimal(micros) / 1_000_000
    if isinstance(raw, bool):
        raise Rejected(f"attribute 'cost_usd' must be a number, got {raw!r}")
    try:
        value = Decimal(str(raw))
    except InvalidOperation:
        raise Rejected(f"attribute 'cost_usd' must be a number, got {raw!r}") from None
    if not value.is_finite():
        raise Rejected(f"attribute 'cost_usd' must be finite, got {raw!r}")
    if value < 0:
        raise Rejected(f"attribute 'cost_usd' is negative ({raw})")
    if value > MAX_COST_USD:
        raise Rejected(f"attribute 'cost_usd' = {raw} is not plausible (over ${MAX_COST_USD:,})")
    return value.quantize(Decimal("0.00000001"))


def _text(attrs: dict, key: str, limit: int = 200) -> str:
    value = attrs.get(key)
    if value is None:
        return ""
    return str(value)[:limit]


def _time(nanos: int) -> datetime:
    try:
        return datetime.fromtimestamp(nanos / 1e9, tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise Rejected(f"time {nanos} is not a representable time") from None


def _iso_time(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def harness_of(name: str, resource: dict) -> str:
    if name.startswith("claude_code."):
        return CLAUDE_CODE
    if name.startswith("codex."):
        return CODEX
    service = str(resource.get("service.name") or "")
    if service.startswith("claude-code"):
        return CLAUDE_CODE
    if service.startswith("codex"):
        return CODEX
    return OTLP


def _session_id(attrs: dict, resource: dict) -> str:
    for source in (attrs, resource):
        for key in SESSION_KEYS:
            value = source.get(key)
            if value not in (None, ""):
                return str(value)[:200]
    return ""


def _digest(*parts) -> str:
    return hashlib.blake2b(
        orjson.dumps(parts, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS),
        digest_size=16,
    ).hexdigest()


_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def _event_key(name: str, nanos: int, attributes_json: bytes) -> str:
    """`_digest(name, nanos, attrs)` from the attributes' sorted JSON, without a second dump."""
    head = orjson.dumps([name, nanos])[:-1]
    return hashlib.blake2b(head + b"," + attributes_json + b"]", digest_size=16).hexdigest()
