"""Instruction visibility matched in the database (seed 000): each call's text is extracted
once into `CallTextExtract` (visible thinking joined, as stored and normalised; the
normalised texts that can deliver an instruction), then both exact and normalised matching
are `strpos` in the database (`instr` on SQLite, the embedded default): no call's text is
read back into Python. The result is the same as matching every call's text
(`traces.analysis.instruction_visibility`)."""

from __future__ import annotations

import unicodedata
import zlib
from collections.abc import Callable
from itertools import chain

import numpy as np
import orjson
import zstandard
from django.db import connection, transaction

from traces.analysis.instruction_visibility import (
    NUL_STAND_IN,
    Matcher,
    normalise,
    visible_thinking,
)

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
            _store(rows)
            written += len(rows)
        if advance:
            advance(len(chunk))
    return written


_STALE_IN_WORKSPACE = """
SELECT ct.call_id FROM traces_calltext ct
JOIN traces_call c ON c.id = ct.call_id
LEFT JOIN analytics_calltextextract e ON e.call_id = ct.call_id
WHERE c.workspace_id = %s {sessions} AND (e.call_id IS NULL
  OR e.source_bytes <> {octets}(ct.data) OR e.version <> %s)
ORDER BY ct.call_id
"""


def stale_call_ids(workspace_id: int, session_ids: list[int] | None = None) -> list[int]:
    """The calls of this workspace (of these sessions only, when given) with a stored text
    but no extract, or a stale one."""
    octets = "octet_length" if _on_postgres() else "length"
    if session_ids is None:
        chunks: list[list[int] | None] = [None]
    else:
        step = 20_000 if _on_postgres() else 900  # SQLite binds each id
        chunks = [session_ids[k : k + step] for k in range(0, len(session_ids), step)]
    found: list[int] = []
    with connection.cursor() as cursor:
        for chunk in chunks:
            clause, params = ("", []) if chunk is None else _ids_clause(chunk)
            sessions = f"AND c.session_id {clause}" if chunk is not None else ""
            cursor.execute(
                _STALE_IN_WORKSPACE.format(octets=octets, sessions=sessions),
                [workspace_id, *params, VERSION],
            )
            found += [row[0] for row in cursor.fetchall()]
    return sorted(found)


# One row per call of the agents the filters reach: its place, whether the filters select
# it, whether its extract is missing or stale (1) or it has no stored text (2), and its
# matches on the stored extract (each `strpos` > 0: 1, else 0; a missing extract gives 0).
FACT_COLUMNS = (
    "id", "session", "agent", "order", "session_index", "selected", "state",
    "blocks", "exact", "normalised", "by_prompt", "by_results",
)  # fmt: skip
_FACTS = """
SELECT c.id, c.session_id, c.agent_id, c.agent_index, c.session_index,
  {is_selected},
  CASE WHEN ct.call_id IS NULL THEN 2
       WHEN e.call_id IS NULL OR e.version <> %s OR e.source_bytes <> {octets}(ct.data) THEN 1
       ELSE 0 END,
  coalesce(e.blocks, 0), coalesce(e.exact, 0), coalesce(e.normalised, 0),
  coalesce(e.by_prompt, 0), coalesce(e.by_results, 0)
FROM traces_call c
{selected_join}LEFT JOIN traces_calltext ct ON ct.call_id = c.id
LEFT JOIN ({matches}) e ON e.call_id = c.id
WHERE c.workspace_id = %s {agents}
"""
# The matches, computed as the extract is scanned (PostgreSQL: OFFSET 0 keeps the
# subquery whole, so no wide text is carried into the joins, and the scan runs in
# parallel workers).
_MATCHES = """
SELECT e.call_id, e.version, e.source_bytes, e.thinking_blocks AS blocks,
  CASE WHEN e.thinking_blocks > 0 AND {find}(e.thinking, %s) > 0 THEN 1 ELSE 0 END AS exact,
  CASE WHEN e.thinking_blocks > 0 AND {find}(e.thinking_normalised, %s) > 0 THEN 1 ELSE 0 END
    AS normalised,
  {by_prompt} AS by_prompt, {by_results} AS by_results
FROM analytics_calltextextract e JOIN traces_call m ON m.id = e.call_id
WHERE m.workspace_id = %s {offset}
"""


_READ_SETTINGS = (
    "SET LOCAL jit = off",
    "SET LOCAL work_mem = '64MB'",
    "SET LOCAL parallel_setup_cost = 0",
    "SET LOCAL parallel_tuple_cost = 0.0001",
)


def call_facts(
    workspace_id: int,
    selected: tuple[str, list] | None,
    agents: tuple[str, list] | None,
    matcher: Matcher,
    *,
    deliveries: bool,
) -> np.ndarray:
    """FACT_COLUMNS (int64, one row a call) for the calls of the agents `agents` (SQL of
    agent ids, and its parameters) reaches, `selected` (SQL of call ids) marking those the
    filters select; None for either: every call of the workspace. Without `deliveries`,
    the delivery columns are 0 (not searched)."""
    find = _strpos()
    text = matcher.normalised_text
    matches = _MATCHES.format(
        find=find,
        by_prompt=f"CASE WHEN {find}(e.prompt_normalised, %s) > 0 THEN 1 ELSE 0 END"
        if deliveries
        else "0",
        by_results=f"CASE WHEN {find}(e.result_normalised, %s) > 0 THEN 1 ELSE 0 END"
        if deliveries
        else "0",
        offset="OFFSET 0" if _on_postgres() else "",
    )
    sql = _FACTS.format(
        is_selected="1" if selected is None else "CASE WHEN s.id IS NULL THEN 0 ELSE 1 END",
        selected_join="" if selected is None else f"LEFT JOIN ({selected[0]}) s ON s.id = c.id\n",
        agents="" if agents is None else f"AND c.agent_id IN ({agents[0]})",
        octets="octet_length" if _on_postgres() else "length",
        matches=matches,
    )
    params = [VERSION, *(selected[1] if selected else []), matcher.exact_text, text]
    params += [text, text] if deliveries else []
    params += [workspace_id, workspace_id, *(agents[1] if agents else [])]
    with transaction.atomic(), connection.cursor() as cursor:
        if _on_postgres():
            # One large read: JIT compiling costs more than it saves, the joins' hashes fit
            # in memory instead of spilling to disk, and the extract's scan (the matching)
            # runs in parallel workers, whose rows are narrow.
            for setting in _READ_SETTINGS:
                cursor.execute(setting)
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    flat = np.fromiter(chain.from_iterable(rows), np.int64, len(rows) * len(FACT_COLUMNS))
    return flat.reshape(len(rows), len(FACT_COLUMNS))


def _row_matches(row: tuple, matcher: Matcher) -> tuple[int, int, int, int, int]:
    """(blocks, exact, normalised, by prompt, by results) of one extract row, matched as
    `strpos` matches the stored row."""
    _, _, _, thinking, thinking_normalised, blocks, prompt, results = row
    text = matcher.normalised_text
    return (
        blocks,
        int(blocks > 0 and matcher.exact_text in thinking),
        int(blocks > 0 and text in thinking_normalised),
        int(text in prompt),
        int(text in results),
    )


def _plain(matcher: Matcher) -> bool:
    """Whether the instruction holds neither NUL nor its stand-in: then matching a text
    and matching its stored form (NUL replaced) agree."""
    texts = (matcher.exact_text, matcher.normalised_text)
    return not any(c in t for c in ("\x00", NUL_STAND_IN) for t in texts)


def _text_matches(data: bytes, decompressor, matcher: Matcher) -> tuple[int, int, int, int, int]:
    """`_row_matches` of this stored text's extract, found with the matcher's own tests
    (its word prefilter skips normalising most texts); the same values for a `_plain`
    instruction."""
    text = orjson.loads(decompressor.decompress(data))
    visible = _visible(text.get("blocks"))
    thinking = "\n".join(visible)
    results = (text.get("results") or {}).values()
    delivering = (
        [text.get("prompt"), text.get("summary")],
        [r.get("content") for r in results if isinstance(r, dict)],
    )
    return (
        len(visible),
        int(bool(visible) and matcher.exact(thinking)),
        int(bool(visible) and matcher.normalised(thinking)),
        *(int(matcher.in_window([str(t) for t in texts if t])) for texts in delivering),
    )


def match_stale(
    call_ids: list[int],
    matcher: Matcher,
    *,
    store: bool,
    advance: Callable[[int], None] | None = None,
) -> dict[int, tuple[int, int, int, int, int]]:
    """Call id → (blocks, exact, normalised, by prompt, by results) for these calls, from
    their stored texts extracted now. With `store` the extracts are written (a job);
    without, nothing is (a request: reads only)."""
    decompressor = zstandard.ZstdDecompressor()
    out = {}
    with connection.cursor() as cursor:
        for start in range(0, len(call_ids), EXTRACT_CHUNK):
            chunk = call_ids[start : start + EXTRACT_CHUNK]
            ids, params = _ids_clause(chunk)
            cursor.execute(f"SELECT call_id, data FROM traces_calltext WHERE call_id {ids}", params)  # noqa: S608
            if store or not _plain(matcher):
                rows = [
                    extract_row(pk, bytes(data), decompressor) for pk, data in cursor.fetchall()
                ]
                if store:
                    _store(rows)
                out.update((row[0], _row_matches(row, matcher)) for row in rows)
            else:  # matched on the text itself, without building the stored forms
                out.update(
                    (pk, _text_matches(bytes(data), decompressor, matcher))
                    for pk, data in cursor.fetchall()
                )
            if advance:
                advance(len(chunk))
    return out


def _store(rows: list[tuple]) -> None:
    """Upsert these extract rows."""
    if not rows:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        if not _on_postgres():
            cursor.executemany(_SQLITE_UPSERT + _ON_CONFLICT, rows)
            return
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS iv_extract_load "
            "(LIKE analytics_calltextextract) ON COMMIT DELETE ROWS"
        )
        cursor.execute("DELETE FROM iv_extract_load")  # inside an outer transaction
        with cursor.copy(f"COPY iv_extract_load ({COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(_UPSERT + _ON_CONFLICT)


def delivered_orders(
    agent: np.ndarray,
    order: np.ndarray,
    by_prompt: np.ndarray,
    by_results: np.ndarray,
    from_start: np.ndarray,
) -> np.ndarray:
    """Per call (rows sorted by agent, then order), the order at which the instruction
    entered its agent's window (NaN: never): the agent's first call for the agents marked
    `from_start`; else its first call whose prompt or summary holds it, or the call after
    one whose tool results hold it, whichever comes first."""
    n = len(agent)
    if not n:
        return np.zeros(0, np.float64)
    same_next = np.zeros(n, bool)
    same_next[:-1] = agent[1:] == agent[:-1]
    following = np.full(n, np.inf)
    following[:-1] = np.where(same_next[:-1], order[1:], np.inf)
    candidate = np.where(by_prompt > 0, order, np.where(by_results > 0, following, np.inf))
    starts = np.flatnonzero(np.r_[True, agent[1:] != agent[:-1]])
    first = np.minimum.reduceat(candidate, starts)
    first = np.where(np.asarray(from_start)[starts], order[starts], first)
    lengths = np.diff(np.r_[starts, n])
    delivered = np.repeat(first, lengths).astype(np.float64)
    delivered[np.isinf(delivered)] = np.nan
    return delivered
