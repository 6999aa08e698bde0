"""Reconciliation of a call's sources: the transcript, an OTLP span, an `api_request`
event. Pure: plain data in, dataclasses out.

Two sources disagree on a field when both carry it (not None) and the values differ. A
call seen in only one source is listed when the session has another source at all: a
session with no telemetry is not a list of every call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

SOURCES = ("transcript", "span", "event")
FIELDS = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens")


@dataclass(frozen=True)
class SourceCounts:
    source: str
    key: str
    timestamp: datetime | None
    values: dict[str, int | None]
    model: str = ""
    cost_usd: Decimal | None = None


@dataclass
class CallSources:
    call_id: int | None
    key: str
    session_index: int | None
    timestamp: datetime | None
    sources: dict[str, SourceCounts] = field(default_factory=dict)


@dataclass(frozen=True)
class Disagreement:
    call_id: int
    key: str
    session_index: int | None
    timestamp: datetime | None
    field: str
    values: dict[str, int]


@dataclass(frozen=True)
class SingleSource:
    call_id: int | None
    key: str
    session_index: int | None
    timestamp: datetime | None
    source: str


@dataclass
class Reconciliation:
    calls: int = 0  # calls plus events that name no stored call
    by_source: dict[str, int] = field(default_factory=dict)  # how many calls each source saw
    joined: int = 0  # calls seen by two sources or more
    disagreeing_calls: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    single_source: list[SingleSource] = field(default_factory=list)
    single_source_total: int = 0
    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    cost_usd: dict[str, Decimal] = field(default_factory=dict)
    truncated: bool = False


def disagreements_of(call: CallSources) -> list[Disagreement]:
    found = []
    for name in FIELDS:
        values = {
            source: counts.values.get(name)
            for source, counts in call.sources.items()
            if counts.values.get(name) is not None
        }
        if len(set(values.values())) > 1:
            found.append(
                Disagreement(call.call_id, call.key, call.session_index, call.timestamp, name,
                             {s: values[s] for s in SOURCES if s in values})
            )  # fmt: skip
    return found


def reconcile(calls: list[CallSources], *, limit: int = 500) -> Reconciliation:
    """Compare the sources of each call; at most `limit` rows in each list."""
    result = Reconciliation(calls=len(calls))
    result.totals = {source: dict.fromkeys(FIELDS, 0) for source in SOURCES}
    seen_sources = set()
    for call in calls:
        seen_sources |= set(call.sources)
    for call in calls:
        for source, counts in call.sources.items():
            result.by_source[source] = result.by_source.get(source, 0) + 1
            for name in FIELDS:
                result.totals[source][name] += counts.values.get(name) or 0
            if counts.cost_usd is not None:
                result.cost_usd[source] = result.cost_usd.get(source, Decimal(0)) + counts.cost_usd
        if len(call.sources) > 1:
            result.joined += 1
            found = disagreements_of(call)
            if found:
                result.disagreeing_calls += 1
                room = limit - len(result.disagreements)
                result.truncated |= len(found) > room
                result.disagreements.extend(found[: max(room, 0)])
        elif len(call.sources) == 1 and len(seen_sources) > 1:
            result.single_source_total += 1
            if len(result.single_source) < limit:
                (source,) = call.sources
                result.single_source.append(
                    SingleSource(call.call_id, call.key, call.session_index, call.timestamp, source)
                )
            else:
                result.truncated = True
    result.totals = {s: t for s, t in result.totals.items() if s in result.by_source}
    return result
