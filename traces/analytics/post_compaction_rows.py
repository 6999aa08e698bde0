"""Observations after compaction read call by call: every observed call (operator
messages, tool results by step since the last compaction) brought to Python with the facts
stored with it (`Call.prompt_kind`, `tool_results`, `tool_errors`, and the operator
prompt's match: `correction_phrase` under `correction_key`), a stale match made again. The
portable path (SQLite), and the reference the grouped PostgreSQL path
(`post_compaction_grouped`) is checked against; also the helpers both share (matching
stale prompts, audit rows, prompt texts)."""

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


@dataclass
class Rematched:
    """The operator prompts whose stored match was stale (made under another phrase list
    or matcher revision, or never made), matched again under `key` by `corpus_load`: the
    caller stores them (`post_compaction_compute.correction_matches_store`)."""

    key: int
    calls: list[int] = field(default_factory=list)
    phrases: list[int] = field(default_factory=list)


def corpus_load_rows(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters,
    matcher: PhraseMatcher,
    rematched: Rematched | None = None,
) -> Corpus:
    """The observations of main-thread runs that a full compaction started, up to step
    MAX_STEP: one per operator message (hit = a phrase matched) and one per tool result of
    a harness that flags errors (hit = is_error). Steps count every call of the run; the
    filters then select which calls are observed.

    Reads the facts the loader stored with each call's text (`text_facts`: prompt kind,
    tool result and error counts, the prompt's match), never the texts. With `rematched`,
    only prompts whose stored match is stale are read and matched, and collected in it;
    without, every prompt is matched now (the reference) and nothing is collected."""
    runs, calls = observed_calls(workspace=workspace, filters=filters, key=_key(rematched))
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
    phrase_of = operator["correction_phrase"].to_numpy(np.int64).copy()
    stale = np.flatnonzero(operator["stale"].to_numpy(bool) | (rematched is None))
    phrase_of[stale] = rematch(operator_ids[stale], matcher, rematched)
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
    *, workspace: Workspace, filters: AnalyticsFilters, key: int | None = None
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The runs of `run_rows` and the calls observed in them, in run and step order (id,
    run, step, session, session_index and the stored text facts; `stale`: the prompt's
    match was not made under `key`); (None, None) without such runs."""
    frame = run_rows(workspace=workspace, filters=filters)
    if frame is None:
        return None, None
    calls = _packed_calls(workspace.pk, [int(a) for a in frame["agent"].unique()], key)
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
        ("correction_phrase", ">i2"),
        ("stale", ">i2"),
    ]
)
_CALL_COLUMNS = [
    "id", "agent", "session_index", "agent_index", "prompt_kind", "tool_results", "tool_errors",
    "correction_phrase", "stale",
]  # fmt: skip
PACKED_AGENTS = 500  # agents per query: a few tens of MB of calls at most
PROMPT_CHUNK = 50_000  # call ids per query for the prompts' texts (PostgreSQL)
TEXT_CHUNK = 10_000  # and elsewhere (SQLite takes at most 32,766 parameters)


def _key(rematched: Rematched | None) -> int | None:
    return None if rematched is None else rematched.key


def _packed_calls(workspace_pk: int, agents: list[int], key: int | None) -> pd.DataFrame:
    """The calls of `agents` (id, agent, session_index, agent_index, prompt_kind,
    tool_results, tool_errors, correction_phrase, stale: not matched under `key`). The
    database packs each query's rows into one bytea of fixed-width records, read with
    numpy: a million rows streamed one by one cost seconds (a binary COPY too: psycopg
    hands its rows over one by one)."""
    if connection.vendor != "postgresql":
        return _calls_by_orm(workspace_pk, agents, key)
    kinds = list(PROMPT_KINDS)
    labels = np.array(["unknown", *kinds], dtype=object)  # array_position is 1-based
    parts = []
    with connection.cursor() as cursor:
        for start in range(0, len(agents), PACKED_AGENTS):
            cursor.execute(
                "SELECT string_agg(int8send(id) || int8send(agent_id) "
                "|| int8send((session_index::int8 << 32) | agent_index::int8) "
                "|| int8send((tool_results::int8 << 32) | (tool_errors::int8 & 4294967295)) "
                "|| int2send(COALESCE(array_position(%s::text[], prompt_kind::text), 0)::int2) "
                "|| int2send(COALESCE(correction_phrase, -1)::int2) "
                "|| int2send((correction_key IS DISTINCT FROM %s::int8)::int::int2), "
                "''::bytea) FROM traces_call WHERE workspace_id = %s AND agent_id = ANY(%s)",
                [kinds, key, workspace_pk, agents[start : start + PACKED_AGENTS]],
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
            "correction_phrase": packed["correction_phrase"].astype(np.int64),
            "stale": packed["stale"] > 0,
        }
    )
    return frame


def _calls_by_orm(workspace_pk: int, agents: list[int], key: int | None) -> pd.DataFrame:
    """`_packed_calls` for the embedded SQLite default: the same columns, row by row."""
    columns = [
        "id", "agent_id", "session_index", "agent_index", "prompt_kind", "tool_results",
        "tool_errors", "correction_phrase", "correction_key",
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
    # The key compared as read: in a frame, a column with nulls would hold it as a float.
    rows = [(*row[:7], -1 if row[7] is None else row[7], row[8] != key) for row in rows]
    frame = pd.DataFrame(rows, columns=_CALL_COLUMNS)
    known = set(PROMPT_KINDS)
    frame["prompt_kind"] = [
        kind if kind in known else "unknown" for kind in frame["prompt_kind"].tolist()
    ]
    for name in _CALL_COLUMNS:
        if name not in ("prompt_kind", "stale"):
            frame[name] = frame[name].astype(np.int64)
    frame["stale"] = frame["stale"].astype(bool)
    return frame


def rematch(call_ids: np.ndarray, matcher: PhraseMatcher, rematched: Rematched | None):
    """The index of the phrase each call's operator prompt matches now (−1: none, or no
    stored prompt), collected in `rematched`. Prompts of the same text are matched once."""
    texts = _prompt_texts(call_ids.tolist())
    found: dict[str, int] = {}
    phrases = np.full(len(call_ids), -1, np.int64)
    for position, call_id in enumerate(call_ids.tolist()):
        prompt = texts.get(call_id)
        if prompt is not None:
            if prompt not in found:
                found[prompt] = matcher.phrase_index(prompt)
            phrases[position] = found[prompt]
    if rematched is not None:
        rematched.calls.extend(call_ids.tolist())
        rematched.phrases.extend(phrases.tolist())
    return phrases


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
