"""Observations after compaction read call by call: every observed call (operator
messages, tool results by step since the last compaction) brought to Python with the facts
stored with it (`Call.prompt_kind`, `tool_results`, `tool_errors`), its operator prompt
matched or looked up in the match cache. The portable path (SQLite), and the reference the
grouped PostgreSQL path (`post_compaction_grouped`) is checked against; also the helpers
both share (the match cache's records, audit rows, prompt texts)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from django.db import connection

from governance.models import Workspace
from traces.analysis.post_compaction import (
    MAX_STEP,
    PROMPT_KINDS,
    Corpus,
    Observations,
    PhraseMatcher,
)
from traces.analytics.selectors import (
    AnalyticsFilters,
    _call_level,
    _runs_for_calls,
    selected_calls,
)
from traces.models import Call, Harness, OperatorPrompt, Run

MAX_MATCHES = 2000  # correction messages kept in the cached result for audit
EXCERPT_CHARS = 240
HARNESSES_WITH_ERROR_FLAGS = {Harness.CLAUDE_CODE}  # Codex rollouts flag no tool result


# One cached match: the call, a 64-bit hash of its operator prompt, the phrase's index.
MATCH_CACHE_DTYPE = np.dtype([("call", "<i8"), ("hash", "<i8"), ("phrase", "<i2")])


@dataclass
class MatchCache:
    """The workspace's cached matches for one phrase list (`key`), as `corpus_load` reads
    and extends them; `changed` once it matched prompts the records did not hold."""

    key: str
    records: np.ndarray = field(default_factory=lambda: np.zeros(0, MATCH_CACHE_DTYPE))
    changed: bool = False


def corpus_load_rows(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters,
    matcher: PhraseMatcher,
    cache: MatchCache | None = None,
) -> Corpus:
    """The observations of main-thread runs that a full compaction started, up to step
    MAX_STEP: one per operator message (hit = a phrase matched) and one per tool result of
    a harness that flags errors (hit = is_error). Steps count every call of the run; the
    filters then select which calls are observed.

    Reads the facts the loader stored with each call's text (`text_facts`: prompt kind and
    tool result and error counts) and the operator prompts alone, never the texts. With a
    `cache` (PostgreSQL), only the prompts it holds no match for (by call and prompt hash)
    are read and matched; it is extended in place for the caller to store."""
    runs, calls = observed_calls(workspace=workspace, filters=filters)
    if runs is None:
        return _empty_corpus()
    flags_errors = runs["id"][runs["harness"].isin(HARNESSES_WITH_ERROR_FLAGS)].to_numpy(np.int64)
    with_results = calls[calls["run"].isin(flags_errors) & (calls["tool_results"] > 0)]
    results = with_results["tool_results"].to_numpy(np.int64)
    errors = with_results["tool_errors"].to_numpy(np.int64)
    # Per call, its errors then its other results: only the counts matter to the rates.
    first_of_call = np.repeat(np.cumsum(results) - results, results)
    tool_hit = (np.arange(int(results.sum())) - first_of_call) < np.repeat(errors, results)
    tool_results = Observations(
        np.repeat(with_results["run"].to_numpy(np.int64), results),
        np.repeat(with_results["step"].to_numpy(np.int64), results),
        tool_hit,
    )
    kinds = calls["prompt_kind"]
    excluded = {
        str(kind): int(count)
        for kind, count in sorted(
            kinds[(kinds != "") & (kinds != "operator")].value_counts().items()
        )
    }
    operator = calls[kinds == "operator"]
    operator_ids = operator["id"].to_numpy(np.int64)
    phrase_of = _phrase_indexes(workspace.pk, operator_ids, matcher, cache)
    hits = phrase_of >= 0
    labels = {
        int(run): {"trigger": trigger, "task_type": task_type}
        for run, trigger, task_type in zip(
            runs["id"].tolist(), runs["trigger"].tolist(), runs["task_type"].tolist(), strict=True
        )
    }
    # Audit rows: the first MAX_MATCHES corrections in run and step order, matched again
    # from their text for the phrase and what it matched.
    kept = np.flatnonzero(hits)[:MAX_MATCHES]
    texts = _prompt_texts(operator_ids[kept].tolist())
    matches: list[dict] = []
    for call_id, run, session, session_index, step in zip(
        *(operator[name].to_numpy(np.int64)[kept].tolist() for name in _AUDIT_COLUMNS), strict=True
    ):
        prompt = texts[call_id]
        matches.append(
            _match_row(
                prompt, matcher.match(prompt), run, labels[run], session, session_index, step
            )
        )
    matches.sort(key=lambda m: (m["session"], m["call_index"]))
    return Corpus(
        Observations(operator["run"].to_numpy(np.int64), operator["step"].to_numpy(np.int64), hits),
        tool_results,
        {
            int(k): str(v)
            for k, v in zip(runs["id"].tolist(), runs["task_type"].tolist(), strict=True)
        },
        {
            int(k): str(v)
            for k, v in zip(runs["id"].tolist(), runs["trigger"].tolist(), strict=True)
        },
        matches,
        excluded,
        int(hits.sum()),
    )


_AUDIT_COLUMNS = ("id", "run", "session", "session_index", "step")


def _empty_corpus() -> Corpus:
    empty = Observations(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))
    return Corpus(empty, empty, {}, {})


def observed_runs(*, workspace: Workspace, filters: AnalyticsFilters):
    """The runs a full compaction started on a main thread, of the filters' task type and
    harness."""
    runs = Run.objects.filter(
        workspace=workspace,
        started_by__isnull=False,
        started_by__kind="full",
        agent__kind="main",
    )
    if filters.task_type:
        runs = runs.filter(task_type=filters.task_type)
    if filters.harness:
        runs = runs.filter(session__harness=filters.harness)
    return runs.order_by()


def run_rows(*, workspace: Workspace, filters: AnalyticsFilters) -> pd.DataFrame | None:
    """`observed_runs` (id, agent, first, last, task_type, trigger, session, harness,
    index), None without any."""
    runs = observed_runs(workspace=workspace, filters=filters)
    sql, params = runs.values_list(*_RUN_COLUMNS.values()).query.sql_with_params()
    with connection.cursor() as cursor:  # the ORM's query, without a model row per run
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return None
    return pd.DataFrame(rows, columns=list(_RUN_COLUMNS))


_RUN_COLUMNS = {
    "id": "id", "agent": "agent_id", "first": "first_call_index", "last": "last_call_index",
    "task_type": "task_type", "trigger": "started_by__trigger", "session": "session_id",
    "harness": "session__harness", "index": "index",
}  # fmt: skip


def observed_calls(
    *, workspace: Workspace, filters: AnalyticsFilters
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The runs of `run_rows` and the calls observed in them, in run and step order (id,
    run, step, session, session_index and the stored text facts); (None, None) without
    such runs."""
    frame = run_rows(workspace=workspace, filters=filters)
    if frame is None:
        return None, None
    calls = _packed_calls(workspace.pk, [int(a) for a in frame["agent"].unique()])
    run_ids, _ = _runs_for_calls(
        calls["agent"].to_numpy(np.int64), calls["session_index"].to_numpy(np.int64), frame
    )
    # In run and step order (a call's step is its place among its run's calls by agent
    # position), up to MAX_STEP; each call with its run's session.
    inside = np.flatnonzero(run_ids >= 0)
    order = inside[np.lexsort((calls["agent_index"].to_numpy(np.int64)[inside], run_ids[inside]))]
    run_sorted = run_ids[order]
    starts = np.r_[0, np.flatnonzero(np.diff(run_sorted)) + 1] if len(order) else np.zeros(0, int)
    step = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)])) + 1
    kept = step <= MAX_STEP
    calls = calls.iloc[order[kept]].reset_index(drop=True)
    calls["run"] = run_sorted[kept]
    calls["step"] = step[kept]
    by_run = frame.set_index("id")["session"]
    calls["session"] = by_run.reindex(calls["run"]).to_numpy(np.int64)
    if filters.project or filters.harness or _call_level(filters):
        chosen = set()
        ids = calls["id"].tolist()
        for start in range(0, len(ids), 20_000):
            chosen.update(
                selected_calls(workspace, filters)
                .filter(id__in=ids[start : start + 20_000])
                .values_list("id", flat=True)
            )
        calls = calls[calls["id"].isin(chosen)]
    return frame, calls


# One call as `_packed_calls` packs it: big-endian, as PostgreSQL's *send functions write;
# the session and agent positions share an int8, and so do the tool result and error counts.
_PACKED_CALL = np.dtype(
    [
        ("id", ">i8"),
        ("agent", ">i8"),
        ("positions", ">i8"),
        ("counts", ">i8"),
        ("prompt_kind", ">i2"),
    ]
)
_CALL_COLUMNS = [
    "id", "agent", "session_index", "agent_index", "prompt_kind", "tool_results", "tool_errors",
]  # fmt: skip
PACKED_AGENTS = 500  # agents per query: a few tens of MB of calls at most
PROMPT_CHUNK = 50_000  # call ids per query for the prompts' hashes
TEXT_CHUNK = 10_000  # and for their texts (SQLite takes at most 32,766 parameters)


def _packed_calls(workspace_pk: int, agents: list[int]) -> pd.DataFrame:
    """The calls of `agents` (id, agent, session_index, agent_index, prompt_kind,
    tool_results, tool_errors). The database packs each query's rows into one bytea of
    fixed-width records, read with numpy: a million rows streamed one by one cost seconds
    (a binary COPY too: psycopg hands its rows over one by one)."""
    if connection.vendor != "postgresql":
        return _calls_by_orm(workspace_pk, agents)
    kinds = list(PROMPT_KINDS)
    labels = np.array(["unknown", *kinds], dtype=object)  # array_position is 1-based
    parts = []
    with connection.cursor() as cursor:
        for start in range(0, len(agents), PACKED_AGENTS):
            cursor.execute(
                "SELECT string_agg(int8send(id) || int8send(agent_id) "
                "|| int8send((session_index::int8 << 32) | agent_index::int8) "
                "|| int8send((tool_results::int8 << 32) | (tool_errors::int8 & 4294967295)) "
                "|| int2send(COALESCE(array_position(%s::text[], prompt_kind::text), 0)::int2), "
                "''::bytea) FROM traces_call WHERE workspace_id = %s AND agent_id = ANY(%s)",
                [kinds, workspace_pk, agents[start : start + PACKED_AGENTS]],
            )
            data = cursor.fetchone()[0]
            if data:
                parts.append(np.frombuffer(bytes(data), dtype=_PACKED_CALL))
    packed = np.concatenate(parts) if parts else np.zeros(0, dtype=_PACKED_CALL)
    positions = packed["positions"].astype(np.int64)
    counts = packed["counts"].astype(np.int64)
    frame = pd.DataFrame(
        {
            "id": packed["id"].astype(np.int64),
            "agent": packed["agent"].astype(np.int64),
            "session_index": positions >> 32,
            "agent_index": positions & 0xFFFFFFFF,
            "prompt_kind": labels[packed["prompt_kind"].astype(np.int64)],
            "tool_results": counts >> 32,
            "tool_errors": counts & 0xFFFFFFFF,
        }
    )
    return frame


def _calls_by_orm(workspace_pk: int, agents: list[int]) -> pd.DataFrame:
    """`_packed_calls` for the embedded SQLite default: the same columns, row by row."""
    columns = [
        "id", "agent_id", "session_index", "agent_index", "prompt_kind", "tool_results",
        "tool_errors",
    ]  # fmt: skip
    rows = []
    for start in range(0, len(agents), PACKED_AGENTS):
        rows.extend(
            Call.objects.filter(
                workspace_id=workspace_pk, agent_id__in=agents[start : start + PACKED_AGENTS]
            )
            .order_by()
            .values_list(*columns)
        )
    frame = pd.DataFrame(rows, columns=_CALL_COLUMNS)
    known = set(PROMPT_KINDS)
    frame["prompt_kind"] = [
        kind if kind in known else "unknown" for kind in frame["prompt_kind"].tolist()
    ]
    for name in _CALL_COLUMNS:
        if name != "prompt_kind":
            frame[name] = frame[name].astype(np.int64)
    return frame


def _phrase_indexes(
    workspace_pk: int, call_ids: np.ndarray, matcher: PhraseMatcher, cache: MatchCache | None
) -> np.ndarray:
    """For each call, the index in `matcher.phrases` of the phrase its operator prompt
    matched, −1 for none (or no stored prompt)."""
    index = {phrase: k for k, phrase in enumerate(matcher.phrases)}
    phrase_of = np.full(len(call_ids), -1, np.int16)
    if len(call_ids) == 0:
        return phrase_of
    if cache is None or connection.vendor != "postgresql":
        texts = _prompt_texts(call_ids.tolist())
        for position, call_id in enumerate(call_ids.tolist()):
            prompt = texts.get(call_id)
            found = matcher.match(prompt) if prompt is not None else None
            if found is not None:
                phrase_of[position] = index[found[0]]
        return phrase_of
    hashed = _prompt_hashes(call_ids)  # sorted by call
    where, stored = _lookup(hashed["call"], call_ids)
    records = cache.records
    at, known = _lookup(records["call"], hashed["call"])
    known[known] = records["hash"][at[known]] == hashed["hash"][known]
    fresh = hashed.copy()
    fresh["phrase"][known] = records["phrase"][at[known]]
    missing = np.flatnonzero(~known)
    if len(missing):
        texts = _prompt_texts(hashed["call"][missing].tolist())
        gone = np.zeros(len(fresh), bool)  # deleted since it was hashed: not kept
        for position in missing.tolist():
            prompt = texts.get(int(hashed["call"][position]))
            found = matcher.match(prompt) if prompt is not None else None
            fresh["phrase"][position] = -1 if found is None else index[found[0]]
            gone[position] = prompt is None
        others = records[~np.isin(records["call"], fresh["call"])]
        merged = np.concatenate([others, fresh[~gone]])
        cache.records = merged[np.argsort(merged["call"], kind="stable")]
        cache.changed = True
    phrase_of[stored] = fresh["phrase"][where[stored]]
    return phrase_of


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each key, its position in `sorted_keys` and whether it is there."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return at, sorted_keys[at] == keys


def _prompt_hashes(call_ids: np.ndarray) -> np.ndarray:
    """MATCH_CACHE_DTYPE records (phrase −1) of the calls' stored prompts, sorted by call:
    PostgreSQL hashes each text, so that only the ones the cache lacks are read."""
    parts = []
    with connection.cursor() as cursor:
        for start in range(0, len(call_ids), PROMPT_CHUNK):
            cursor.execute(
                "SELECT string_agg(int8send(call_id) || int8send(hashtextextended(text, 0)), "
                "''::bytea) FROM traces_operatorprompt WHERE call_id = ANY(%s::int8[])",
                [_int8_array(call_ids[start : start + PROMPT_CHUNK].tolist())],
            )
            data = cursor.fetchone()[0]
            if data:
                parts.append(np.frombuffer(bytes(data), dtype=[("call", ">i8"), ("hash", ">i8")]))
    rows = np.concatenate(parts) if parts else np.zeros(0, [("call", ">i8"), ("hash", ">i8")])
    records = np.zeros(len(rows), MATCH_CACHE_DTYPE)
    records["call"], records["hash"], records["phrase"] = rows["call"], rows["hash"], -1
    return records[np.argsort(records["call"], kind="stable")]


def _int8_array(values: list[int]) -> str:
    """An int8[] literal: psycopg adapts a long list of ints item by item, far slower."""
    return "{" + ",".join(map(str, values)) + "}"


def _prompt_texts(call_ids: list[int]) -> dict[int, str]:
    """The stored operator prompts of these calls, by call id."""
    texts: dict[int, str] = {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for start in range(0, len(call_ids), PROMPT_CHUNK):
                cursor.execute(
                    "SELECT call_id, text FROM traces_operatorprompt "
                    "WHERE call_id = ANY(%s::int8[])",
                    [_int8_array(call_ids[start : start + PROMPT_CHUNK])],
                )
                texts.update(cursor.fetchall())
        return texts
    for start in range(0, len(call_ids), TEXT_CHUNK):
        texts.update(
            OperatorPrompt.objects.filter(
                call_id__in=call_ids[start : start + TEXT_CHUNK]
            ).values_list("call_id", "text")
        )
    return texts


def _match_row(
    prompt: str, found: tuple[str, str], run: int, labels: dict, session, session_index, step
) -> dict:
    phrase, matched = found
    at = prompt.lower().find(matched.lower())
    lo = max(0, at - EXCERPT_CHARS // 2)
    excerpt = prompt[lo : lo + EXCERPT_CHARS]
    return {
        "session": int(session),
        "run": int(run),
        "call_index": int(session_index),
        "step": int(step),
        "trigger": str(labels["trigger"]),
        "task_type": str(labels["task_type"]),
        "phrase": phrase,
        "matched": matched,
        "excerpt": ("…" if lo else "")
        + excerpt
        + ("…" if lo + EXCERPT_CHARS < len(prompt) else ""),
    }
