"""Observations after compaction grouped in PostgreSQL: one statement finds each observed
call's step from the facts derivation stores (`Call.agent_index`, `Run.first_agent_index`:
step = agent_index − first_agent_index + 1) and returns per run and step class the operator
messages, their cached corrections and the tool results and errors: tens of thousands of
rows where the row-by-row path (`post_compaction_rows`) brought every observed call to
Python. Only the operator prompts the match cache holds nothing current for (missing, or
edited since: their hash differs) come back one by one, to be matched here.

A step class is a range of steps in which every range the analysis asks about (the bins,
steps 1–5, the baseline) either holds all steps or none; each class's observations stand
at its first step, so the section is the same as from the exact steps."""

from __future__ import annotations

import numpy as np
from django.db import connection, transaction

from governance.models import Workspace
from traces.analysis.post_compaction import (
    BASELINE_STEPS,
    BIN_EDGES,
    FIRST_STEPS,
    MAX_STEP,
    PROMPT_KINDS,
    Corpus,
    Observations,
    PhraseMatcher,
)
from traces.analytics.post_compaction_rows import (
    HARNESSES_WITH_ERROR_FLAGS,
    MATCH_CACHE_DTYPE,
    MAX_MATCHES,
    MatchCache,
    _empty_corpus,
    _int8_array,
    _match_row,
    _prompt_texts,
    run_rows,
)
from traces.analytics.selectors import AnalyticsFilters, _call_level, selected_calls


def _class_starts() -> list[int]:
    """The first step of each class: every range's ends split the steps 1..MAX_STEP."""
    ranges = [*BIN_EDGES, FIRST_STEPS, BASELINE_STEPS]
    cuts = {1} | {lo for lo, _ in ranges} | {hi + 1 for _, hi in ranges}
    return sorted(cut for cut in cuts if 1 <= cut <= MAX_STEP)


CLASS_STARTS = np.array(_class_starts(), np.int64)

# {runs}: the observed runs' ids (a subquery); {selected}: the call filters, or nothing.
GROUPED_SQL = """
WITH runs AS MATERIALIZED (
    SELECT r.id, r.agent_id, s.harness = ANY(%(flagging)s) AS flags, LEAST(r.call_count, %(max_step)s) AS n,
           COALESCE(r.first_agent_index, (
               SELECT min(c0.agent_index) FROM traces_call c0
               WHERE c0.session_id = r.session_id AND c0.session_index = r.first_call_index
                 AND c0.agent_id = r.agent_id
           )) AS lo
    FROM traces_run r JOIN traces_session s ON s.id = r.session_id
    WHERE r.id IN ({runs})
), observed AS MATERIALIZED (
    SELECT runs.id AS run, c.id, c.agent_index - runs.lo + 1 AS step, c.session_index,
           c.prompt_kind, runs.flags, c.tool_results, c.tool_errors
    FROM runs CROSS JOIN LATERAL (  -- per run, its first calls by the (agent, agent_index) index
        SELECT c.id, c.agent_index, c.session_index, c.prompt_kind, c.tool_results, c.tool_errors
        FROM traces_call c
        WHERE c.agent_id = runs.agent_id AND c.agent_index >= runs.lo AND c.agent_index < runs.lo + runs.n
    ) AS c
    WHERE true {selected}  -- an agent's calls are its workspace's, as its runs are
), cached (call, hash, phrase) AS (
    SELECT * FROM unnest(%(calls)s::int8[], %(hashes)s::int8[], %(phrases)s::int2[])
), operator AS MATERIALIZED (
    SELECT o.run, o.id, o.step, o.session_index, p.hash IS NOT NULL AS prompted,
           p.hash, k.hash AS cached_hash, k.phrase
    FROM observed o
    LEFT JOIN LATERAL (  -- by the primary key: no other workspace's prompt is read
        SELECT hashtextextended(p.text, 0) AS hash FROM traces_operatorprompt p
        WHERE p.call_id = o.id OFFSET 0  -- (kept a lookup: no text hashed a second time)
    ) AS p ON true
    LEFT JOIN cached k ON k.call = o.id
    WHERE o.prompt_kind = 'operator'
), known AS (
    SELECT run, step, prompted AND cached_hash = hash AND phrase >= 0 AS hit
    FROM operator WHERE NOT prompted OR cached_hash = hash
), per_class AS (
    SELECT run, class, sum(n) AS n, sum(hits) AS hits, sum(results) AS results,
           sum(errors) AS errors
    FROM (
        SELECT run, width_bucket(step, %(starts)s::int[]) AS class, count(*) AS n,
               count(*) FILTER (WHERE hit) AS hits, 0::int8 AS results, 0::int8 AS errors
        FROM known GROUP BY 1, 2
        UNION ALL
        SELECT run, width_bucket(step, %(starts)s::int[]), 0, 0, sum(tool_results),
               sum(tool_errors)
        FROM observed WHERE flags AND tool_results > 0 GROUP BY 1, 2
    ) AS parts GROUP BY 1, 2
)
SELECT
    (SELECT string_agg(int8send(run) || int2send(class::int2) || int4send(n::int4)
                       || int4send(hits::int4) || int8send(results::int8) || int8send(errors::int8),
                       ''::bytea) FROM per_class),
    (SELECT string_agg(int8send(id) || int8send(run) || int4send(step::int4)
                       || int4send(session_index::int4) || int8send(hash), ''::bytea)
     FROM operator WHERE prompted AND cached_hash IS DISTINCT FROM hash),
    (SELECT string_agg(int8send(id) || int8send(run) || int4send(step::int4)
                       || int4send(session_index::int4), ''::bytea)
     FROM (SELECT id, run, step, session_index FROM operator
           WHERE prompted AND cached_hash = hash AND phrase >= 0
           ORDER BY run, step LIMIT %(max_matches)s) AS first_hits),
    (SELECT json_object_agg(kind, n) FROM (
        SELECT CASE WHEN prompt_kind = ANY(%(kinds)s) THEN prompt_kind ELSE 'unknown' END AS kind,
               count(*) AS n
        FROM observed WHERE prompt_kind NOT IN ('', 'operator') GROUP BY 1) AS kinds)
"""
_PER_CLASS = np.dtype(
    [("run", ">i8"), ("cls", ">i2"), ("n", ">i4"), ("hits", ">i4"), ("results", ">i8"),
     ("errors", ">i8")]
)  # fmt: skip
_STALE = np.dtype(
    [("id", ">i8"), ("run", ">i8"), ("step", ">i4"), ("index", ">i4"), ("hash", ">i8")]
)
_HIT = np.dtype([("id", ">i8"), ("run", ">i8"), ("step", ">i4"), ("index", ">i4")])


def corpus_load_grouped(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters,
    matcher: PhraseMatcher,
    cache: MatchCache | None = None,
) -> Corpus:
    """`post_compaction_rows.corpus_load_rows`, grouped in PostgreSQL (see the module)."""
    cache = cache if cache is not None else MatchCache("")  # none: every prompt matched
    runs, runs_sql, runs_params = run_rows(workspace=workspace, filters=filters)
    if runs is None:
        return _empty_corpus()
    selected, selected_params = "", []
    if filters.project or filters.harness or _call_level(filters):
        sql, selected_params = (
            selected_calls(workspace, filters).values("id").query.sql_with_params()
        )
        selected = f"AND c.id IN ({sql})"
    records = cache.records
    params = {
        "flagging": sorted(str(harness) for harness in HARNESSES_WITH_ERROR_FLAGS),
        "max_step": MAX_STEP,
        "calls": _int8_array(records["call"].tolist()),
        "hashes": _int8_array(records["hash"].tolist()),
        "phrases": _int8_array(records["phrase"].tolist()),
        "starts": CLASS_STARTS.tolist(),
        "max_matches": MAX_MATCHES,
        "kinds": list(PROMPT_KINDS),
    }
    # The two subqueries' own %s placeholders, named so that they mix with the others.
    names = [f"runs_{k}" for k in range(len(runs_params))]
    names += [f"selected_{k}" for k in range(len(selected_params))]
    params.update(zip(names, [*runs_params, *selected_params], strict=True))
    runs_named = runs_sql % tuple(f"%({name})s" for name in names[: len(runs_params)])
    selected_named = selected % tuple(f"%({name})s" for name in names[len(runs_params) :])
    with transaction.atomic(), connection.cursor() as cursor:
        # Compiling this statement took longer than running it (about 1.6 s at 1M calls).
        cursor.execute("SET LOCAL jit = off")
        cursor.execute("SET LOCAL work_mem = '64MB'")  # its sorts and hashes in memory
        cursor.execute("SET LOCAL enable_mergejoin = off")  # it misjudges the cache's join
        cursor.execute(GROUPED_SQL.format(runs=runs_named, selected=selected_named), params)
        per_class, stale, hits, excluded = cursor.fetchone()
    per_class = _records(per_class, _PER_CLASS)
    stale, hits = _records(stale, _STALE), _records(hits, _HIT)
    labels = {
        int(run): {"trigger": trigger, "task_type": task_type}
        for run, trigger, task_type in zip(
            runs["id"].tolist(), runs["trigger"].tolist(), runs["task_type"].tolist(), strict=True
        )
    }
    session_of = dict(zip(runs["id"].tolist(), runs["session"].tolist(), strict=True))
    texts = _prompt_texts(stale["id"].tolist())
    stale_hit = _match_stale(stale, texts, matcher, cache)
    corrections = _observations(
        per_class["run"], per_class["cls"], per_class["n"], per_class["hits"]
    )
    new = np.flatnonzero(stale_hit)
    corrections = _join(corrections, _observations(stale["run"], _class_of(stale["step"]),
                                                   np.ones(len(stale), np.int64),
                                                   stale_hit.astype(np.int64)))  # fmt: skip
    tool_results = _observations(
        per_class["run"], per_class["cls"], per_class["results"], per_class["errors"]
    )
    # Audit rows: the first MAX_MATCHES corrections in run and step order, of those known
    # (the first MAX_MATCHES of them at most) and those matched now.
    audit = [
        (int(run), int(step), int(call), int(index))
        for call, run, step, index in zip(hits["id"], hits["run"], hits["step"], hits["index"], strict=True)
    ] + [
        (int(stale["run"][k]), int(stale["step"][k]), int(stale["id"][k]), int(stale["index"][k]))
        for k in new.tolist()
    ]  # fmt: skip
    audit = sorted(audit)[:MAX_MATCHES]
    audit_texts = _prompt_texts([call for _, _, call, _ in audit])
    matches = [
        _match_row(audit_texts[call], matcher.match(audit_texts[call]), run, labels[run],
                   session_of[run], index, step)
        for run, step, call, index in audit
    ]  # fmt: skip
    matches.sort(key=lambda m: (m["session"], m["call_index"]))
    return Corpus(
        corrections,
        tool_results,
        {int(k): str(v) for k, v in zip(runs["id"].tolist(), runs["task_type"].tolist(), strict=True)},
        {int(k): str(v) for k, v in zip(runs["id"].tolist(), runs["trigger"].tolist(), strict=True)},
        matches,
        dict(sorted((excluded or {}).items())),
        int(corrections.hit.sum()),
    )  # fmt: skip


def _records(data, dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype) if data else np.zeros(0, dtype)


def _class_of(step: np.ndarray) -> np.ndarray:
    """The 1-based class of each step, as width_bucket numbers it."""
    return np.searchsorted(CLASS_STARTS, step.astype(np.int64), side="right")


def _observations(run, cls, n, hits) -> Observations:
    """`n` observations per row at its class's first step, the first `hits` of them hits."""
    n = n.astype(np.int64)
    keep = n > 0
    run, cls, n, hits = run[keep], cls[keep], n[keep], hits[keep].astype(np.int64)
    first_of_row = np.repeat(np.cumsum(n) - n, n)
    hit = (np.arange(int(n.sum())) - first_of_row) < np.repeat(hits, n)
    step = CLASS_STARTS[cls.astype(np.int64) - 1]
    return Observations(np.repeat(run.astype(np.int64), n), np.repeat(step, n), hit)


def _join(a: Observations, b: Observations) -> Observations:
    return Observations(
        np.concatenate([a.run, b.run]), np.concatenate([a.step, b.step]),
        np.concatenate([a.hit, b.hit]),
    )  # fmt: skip


def _match_stale(
    stale: np.ndarray, texts: dict[int, str], matcher: PhraseMatcher, cache: MatchCache
) -> np.ndarray:
    """Match the prompts the cache held nothing current for, and put them in it (a prompt
    deleted since the statement read it counts as no correction and is not kept)."""
    index = {phrase: k for k, phrase in enumerate(matcher.phrases)}
    phrase = np.full(len(stale), -1, np.int16)
    gone = np.zeros(len(stale), bool)
    for position, call in enumerate(stale["id"].tolist()):
        prompt = texts.get(call)
        found = matcher.match(prompt) if prompt is not None else None
        phrase[position] = -1 if found is None else index[found[0]]
        gone[position] = prompt is None
    if len(stale):
        fresh = np.zeros(int((~gone).sum()), MATCH_CACHE_DTYPE)
        fresh["call"], fresh["hash"], fresh["phrase"] = (
            stale["id"][~gone],
            stale["hash"][~gone],
            phrase[~gone],
        )
        others = cache.records[~np.isin(cache.records["call"], stale["id"].astype(np.int64))]
        merged = np.concatenate([others, fresh])
        cache.records = merged[np.argsort(merged["call"], kind="stable")]
        cache.changed = True
    return phrase >= 0
