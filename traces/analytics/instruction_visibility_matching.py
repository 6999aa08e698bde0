"""Instruction visibility matched in the database (seed 000): each call's text is extracted
once into `CallTextExtract` (visible thinking joined, as stored and normalised; the
normalised texts that can deliver an instruction), then both exact and normalised matching
are `strpos` in the database (`instr` on SQLite, the embedded default): no call's text is
read back into Python. The result is the same as matching every call's text
(`traces.analysis.instruction_visibility`)."""

from __future__ import annotations

import unicodedata
import zlib
from collections.abc import Callable, Iterator

import numpy as np
import orjson
import pandas as pd
import zstandard
from django.db import connection, transaction

from traces.analysis.instruction_visibility import (
    NUL_STAND_IN,
    Matcher,
    normalise,
    visible_thinking,
)

CHUNK = 20_000  # call ids per query (PostgreSQL: one array parameter)
SQLITE_CHUNK = 900  # SQLite binds each id as its own parameter
EXTRACT_CHUNK = 2_000  # texts decompressed and written per transaction
# What the stored normalised texts depend on: this revision of the extract, and the Unicode
# tables that `normalise` reads; another value makes every extract stale.
VERSION = zlib.crc32(f"extract 2, unicode {unicodedata.unidata_version}".encode())
COLUMNS = (
    "call_id, source_bytes, version, thinking, thinking_normalised, thinking_blocks, "
    "prompt_normalised, result_normalised"
)

_STALE = """
SELECT ct.call_id, ct.data FROM traces_calltext ct
LEFT JOIN analytics_calltextextract e ON e.call_id = ct.call_id
WHERE ct.call_id {ids}
  AND (e.call_id IS NULL OR e.source_bytes <> {octets}(ct.data) OR e.version <> %s)
"""
_ON_CONFLICT = """
ON CONFLICT (call_id) DO UPDATE SET source_bytes = EXCLUDED.source_bytes,
    version = EXCLUDED.version, thinking = EXCLUDED.thinking,
    thinking_normalised = EXCLUDED.thinking_normalised,
    thinking_blocks = EXCLUDED.thinking_blocks,
    prompt_normalised = EXCLUDED.prompt_normalised,
    result_normalised = EXCLUDED.result_normalised
"""
# Constant column names only, never input: S608 does not apply.
_UPSERT = f"INSERT INTO analytics_calltextextract ({COLUMNS}) SELECT {COLUMNS} FROM iv_extract_load"  # noqa: S608
_SQLITE_UPSERT = (
    f"INSERT INTO analytics_calltextextract ({COLUMNS}) VALUES ({', '.join(['%s'] * 8)})"  # noqa: S608
)


def _on_postgres() -> bool:
    return connection.vendor == "postgresql"


def _ids_clause(ids: list[int]) -> tuple[str, list]:
    """`IN` for these ids, and its parameters: one array on PostgreSQL, one each on SQLite."""
    if _on_postgres():
        return "= ANY(%s::bigint[])", [ids]
    return f"IN ({', '.join(['%s'] * len(ids))})", list(ids)


def _strpos() -> str:
    return "strpos" if _on_postgres() else "instr"


def _stored(text: str) -> str:
    return text.replace("\x00", NUL_STAND_IN)


def _normalised(texts) -> str:
    """Each text normalised, joined by newlines (which no normalised text holds)."""
    return "\n".join(t for t in (_stored(normalise(str(t))) for t in texts if t) if t)


def _visible(blocks) -> tuple[str, ...]:
    return visible_thinking(
        str(b.get("text") or "")
        for b in blocks or ()
        if isinstance(b, dict) and b.get("type") == "thinking"
    )


def extract_row(call_id: int, data: bytes, decompressor) -> tuple:
    """The extract of one stored call text (zstd JSON, as the loader writes it)."""
    text = orjson.loads(decompressor.decompress(data))
    visible = _visible(text.get("blocks"))
    thinking = "\n".join(visible)
    results = (text.get("results") or {}).values()
    return (
        call_id,
        len(data),
        VERSION,
        _stored(thinking),
        _normalised([thinking]),
        len(visible),
        _normalised([text.get("prompt"), text.get("summary")]),
        _normalised(r.get("content") for r in results if isinstance(r, dict)),
    )


def extract_missing(call_ids: list[int], advance: Callable[[int], None] | None = None) -> int:
    """Extract the texts of these calls that have no extract yet, or a stale one; the
    number extracted. `advance(k)` is told after each `k` calls checked."""
    decompressor = zstandard.ZstdDecompressor()
    written = 0
    for start in range(0, len(call_ids), EXTRACT_CHUNK):
        chunk = call_ids[start : start + EXTRACT_CHUNK]
        with transaction.atomic(), connection.cursor() as cursor:
            ids, params = _ids_clause(chunk)
            octets = "octet_length" if _on_postgres() else "length"
            cursor.execute(_STALE.format(ids=ids, octets=octets), [*params, VERSION])
            rows = [extract_row(pk, bytes(data), decompressor) for pk, data in cursor.fetchall()]
            if rows and not _on_postgres():
                cursor.executemany(_SQLITE_UPSERT + _ON_CONFLICT, rows)
            elif rows:
                cursor.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS iv_extract_load "
                    "(LIKE analytics_calltextextract) ON COMMIT DELETE ROWS"
                )
                cursor.execute("DELETE FROM iv_extract_load")  # inside an outer transaction
                with cursor.copy(f"COPY iv_extract_load ({COLUMNS}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                cursor.execute(_UPSERT + _ON_CONFLICT)
                written += len(rows)
        if advance:
            advance(len(chunk))
    return written


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    size = CHUNK if _on_postgres() else SQLITE_CHUNK
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def window_matches(call_ids: list[int], matcher: Matcher) -> Iterator[tuple[int, str]]:
    """(call id, 'prompt' or 'results') for the calls whose prompt or summary, else whose
    tool results, hold the instruction (normalised match)."""
    find, text = _strpos(), matcher.normalised_text
    with connection.cursor() as cursor:
        for chunk in _chunks(call_ids):
            ids, params = _ids_clause(chunk)
            cursor.execute(
                f"SELECT e.call_id, {find}(e.prompt_normalised, %s) > 0 "  # noqa: S608
                f"FROM analytics_calltextextract e WHERE e.call_id {ids} "
                f"AND ({find}(e.prompt_normalised, %s) > 0 OR {find}(e.result_normalised, %s) > 0)",
                [text, *params, text, text],
            )
            for call_id, by_prompt in cursor.fetchall():
                yield call_id, "prompt" if by_prompt else "results"


def delivered_at(calls: pd.DataFrame, matcher: Matcher, *, from_start: set) -> dict:
    """Each agent's order at which the instruction entered its window: its first call for
    the agents in `from_start`; else its first call whose prompt or summary holds it, or
    the call after one whose tool results hold it, whichever comes first."""
    first = calls.groupby("agent", sort=False)["order"].min()
    delivered = {agent: int(first[agent]) for agent in from_start if agent in first.index}
    rest = calls[~calls["agent"].isin(delivered)]
    if not len(rest):
        return delivered
    where = {
        pk: (agent, order)
        for pk, agent, order in zip(
            rest["id"].tolist(), rest["agent"].tolist(), rest["order"].tolist(), strict=True
        )
    }
    orders = {
        agent: np.sort(group.to_numpy(np.int64))
        for agent, group in rest.groupby("agent", sort=False)["order"]
    }
    for call_id, source in window_matches(list(where), matcher):
        agent, order = where[call_id]
        if source == "results":
            later = orders[agent]
            position = int(np.searchsorted(later, order, side="right"))
            if position == len(later):
                continue
            order = int(later[position])
        if order < delivered.get(agent, order + 1):
            delivered[agent] = order
    return delivered


def thinking_matches(call_ids: list[int], matcher: Matcher) -> dict[int, tuple[int, bool, bool]]:
    """Call id → (visible thinking blocks, exact match, normalised match), for the calls
    with visible thinking, both matched by `strpos` on the extract."""
    find = _strpos()
    out = {}
    with connection.cursor() as cursor:
        for chunk in _chunks(call_ids):
            ids, params = _ids_clause(chunk)
            cursor.execute(
                f"SELECT e.call_id, e.thinking_blocks, {find}(e.thinking, %s) > 0, "  # noqa: S608
                f"{find}(e.thinking_normalised, %s) > 0 FROM analytics_calltextextract e "
                f"WHERE e.call_id {ids} AND e.thinking_blocks > 0",
                [matcher.exact_text, matcher.normalised_text, *params],
            )
            for call_id, blocks, exact, normalised in cursor.fetchall():
                out[call_id] = (blocks, exact, normalised)
    return out


def call_columns(calls: pd.DataFrame, delivered: dict, matcher: Matcher) -> dict:
    """The selected calls as the columns `visibility_from_arrays` counts: those in the
    window matched in the database."""
    selected = calls[calls["selected"]]
    first = selected["agent"].map(delivered).to_numpy(np.float64)
    order = selected["order"].to_numpy(np.float64)
    inside = ~np.isnan(first) & (order >= np.nan_to_num(first, nan=np.inf))
    ids = selected["id"].to_numpy(np.int64)
    matched = thinking_matches(ids[inside].tolist(), matcher)
    blocks = np.zeros(len(ids), np.int64)
    exact = np.zeros(len(ids), bool)
    normalised = np.zeros(len(ids), bool)
    if matched:
        at = pd.Index(ids).get_indexer(list(matched))
        values = np.array(list(matched.values()), dtype=np.int64)
        blocks[at], exact[at], normalised[at] = values[:, 0], values[:, 1] > 0, values[:, 2] > 0
    return {
        "session": selected["session"].to_numpy(),
        "agent": selected["agent"].to_numpy(),
        "order": order,
        "delivered_at": first,
        "blocks": blocks,
        "exact": exact,
        "normalised": normalised,
    }
