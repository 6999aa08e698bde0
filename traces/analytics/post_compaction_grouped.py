"""Observations after compaction grouped in PostgreSQL: one statement finds each observed
call's step from the facts derivation stores (`Call.agent_index`, `Run.first_agent_index`:
step = agent_index − first_agent_index + 1), reading the runs' calls index-only, and counts
per run and step class the operator messages, the corrections whose stored match
(`Call.correction_phrase`) is current, the stale matches, the tool results and errors. It
returns one by one only the operator messages whose match is stale (another phrase list,
or none made yet: read and matched here) and the current corrections of the runs holding
the first MAX_MATCHES (the audit rows). The row-by-row path (`post_compaction_rows`)
brought every observed call to Python.

A step class is a range of steps in which every range the analysis asks about (the bins,
steps 1–5, the baseline) either holds all steps or none. Observations are laid out from the
counts per run (steps 1–5, baseline, all) and per (task type, trigger) and class, each at
its class's first step: every rate, interval and bootstrap is the same as from the exact
steps."""

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
    MAX_MATCHES,
    Rematched,
    _empty_corpus,
    _match_row,
    _prompt_texts,
    rematch,
)
from traces.analytics.selectors import AnalyticsFilters, _call_level, selected_calls


def _class_starts() -> list[int]:
    """The first step of each class: every range's ends split the steps 1..MAX_STEP."""
    ranges = [*BIN_EDGES, FIRST_STEPS, BASELINE_STEPS]
    cuts = {1} | {lo for lo, _ in ranges} | {hi + 1 for _, hi in ranges}
    return sorted(cut for cut in cuts if 1 <= cut <= MAX_STEP)


CLASS_STARTS = np.array(_class_starts(), np.int64)

CLASS_SEGMENTS = {  # classes of steps 1–5, of the baseline, and the rest (0-based)
    "first": np.flatnonzero((FIRST_STEPS[0] <= CLASS_STARTS) & (FIRST_STEPS[1] >= CLASS_STARTS)),
    "baseline": np.flatnonzero(
        (BASELINE_STEPS[0] <= CLASS_STARTS) & (BASELINE_STEPS[1] >= CLASS_STARTS)
    ),
}
CLASS_SEGMENTS["middle"] = np.setdiff1d(
    np.arange(len(CLASS_STARTS)), np.r_[CLASS_SEGMENTS["first"], CLASS_SEGMENTS["baseline"]]
)

# {run_filters}: the task type and harness filters; {selected}: the call filters (a
# subquery), or nothing.
# A run's group is its (task type, trigger): the bins are counted per group and class, the
# steps 1–5 and baseline per run (for the bootstrap over compactions).
GROUPED_SQL = """
WITH runs AS MATERIALIZED (
    SELECT r.id, r.agent_id, r.session_id, r.task_type, k.trigger,
           dense_rank() OVER (ORDER BY r.task_type, k.trigger) - 1 AS grp,
           s.harness = ANY(%(flagging)s) AS flags, LEAST(r.call_count, %(max_step)s) AS n,
           COALESCE(r.first_agent_index, (
               SELECT min(c0.agent_index) FROM traces_call c0
               WHERE c0.session_id = r.session_id AND c0.session_index = r.first_call_index
                 AND c0.agent_id = r.agent_id
           )) AS lo
    FROM traces_run r  -- as `post_compaction_rows.observed_runs` selects them
    JOIN traces_compaction k ON k.id = r.started_by_id AND k.kind = 'full'
    JOIN traces_agent a ON a.id = r.agent_id AND a.kind = 'main'
    JOIN traces_session s ON s.id = r.session_id
    WHERE r.workspace_id = %(workspace)s {run_filters}
), classes AS MATERIALIZED (  -- per run, its first calls (index-only) counted by class
    SELECT runs.id AS run, x.*
    FROM runs CROSS JOIN LATERAL (
        SELECT width_bucket(c.agent_index - runs.lo + 1, %(starts)s::int[]) AS class,
               count(*) FILTER (WHERE c.prompt_kind = 'operator') AS n,
               count(*) FILTER (WHERE c.prompt_kind = 'operator' AND {current}
                                AND c.correction_phrase >= 0) AS h,
               count(*) FILTER (WHERE c.prompt_kind = 'operator' AND NOT {current}) AS stale,
               CASE WHEN runs.flags THEN sum(c.tool_results) ELSE 0 END AS t,
               CASE WHEN runs.flags THEN sum(c.tool_errors) ELSE 0 END AS e,
               {kind_counts}
        FROM traces_call c
        WHERE c.agent_id = runs.agent_id AND c.agent_index >= runs.lo
          AND c.agent_index < runs.lo + runs.n {selected}
        GROUP BY 1
    ) AS x
), per_run AS (
    SELECT run, sum(h) AS h, sum(stale) AS stale,
           sum(sum(h)) OVER (ORDER BY run) - sum(h) AS hits_before
    FROM classes GROUP BY run
), marked AS (  -- operator messages one by one: the stale, and the runs' first current hits
    SELECT runs.id AS run, runs.session_id AS session, c.id, c.agent_index - runs.lo + 1 AS step,
           c.session_index, NOT {current} AS stale
    FROM per_run JOIN runs ON runs.id = per_run.run CROSS JOIN LATERAL (
        SELECT c.id, c.agent_index, c.session_index, c.correction_key FROM traces_call c
        WHERE c.agent_id = runs.agent_id AND c.agent_index >= runs.lo
          AND c.agent_index < runs.lo + runs.n {selected} AND c.prompt_kind = 'operator'
          AND (NOT {current} OR c.correction_phrase >= 0)
    ) AS c
    WHERE per_run.stale > 0 OR (per_run.h > 0 AND per_run.hits_before < %(max_matches)s)
)
SELECT
    (SELECT string_agg(int8send(id) || int4send(grp::int4), ''::bytea) FROM runs),
    (SELECT json_agg(json_build_array(grp, task_type, trigger))
     FROM (SELECT DISTINCT grp, task_type, trigger FROM runs) AS labels),
    (SELECT string_agg(int8send(run) || int2send(class::int2) || int8send(n) || int8send(h)
                       || int8send(t::int8) || int8send(e::int8), ''::bytea) FROM classes),
    (SELECT string_agg(int8send(id) || int8send(run) || int8send(session) || int4send(step::int4)
                       || int4send(session_index::int4) || int2send(stale::int::int2), ''::bytea)
     FROM marked),
    (SELECT json_build_object({kind_totals}) FROM classes)
"""
# A call's stored match is current: made under the phrase list asked about (unless every
# prompt is to be matched again).
CURRENT = "(NOT %(everything)s AND c.correction_key IS NOT DISTINCT FROM %(key)s::int8)"
_RUN = np.dtype([("id", ">i8"), ("grp", ">i4")])
# Per run: operator messages and corrections in steps 1–5, in the baseline, in all; then
# tool results and errors likewise.
_PER_RUN_FIELDS = ("n1", "h1", "nb", "hb", "n", "h", "t1", "e1", "tb", "eb", "t", "e")
# Per run and class (1-based): operator messages and corrections, or tool results and errors.
_CLASS_COUNTS = np.dtype([("run", ">i8"), ("cls", ">i2"), ("n", ">i8"), ("h", ">i8")])
# Per run and class as the statement counts them: operator messages, current corrections,
# tool results and errors.
_CLASSES = np.dtype(
    [("run", ">i8"), ("cls", ">i2"), ("n", ">i8"), ("h", ">i8"), ("t", ">i8"), ("e", ">i8")]
)
# The prompt kinds counted (not operator messages), as a run's calls hold them.
_EXCLUDED_KINDS = [kind for kind in PROMPT_KINDS if kind not in ("", "operator")] + ["unknown"]


def _kind_columns() -> tuple[str, str]:
    """The per-class count of each excluded kind, and their totals as JSON pairs."""
    known = ", ".join(f"'{kind}'" for kind in PROMPT_KINDS)
    counts, totals = [], []
    for number, kind in enumerate(_EXCLUDED_KINDS):
        where = f"prompt_kind NOT IN ({known})" if kind == "unknown" else f"prompt_kind = '{kind}'"
        counts.append(f"count(*) FILTER (WHERE {where}) AS kind_{number}")
        totals.append(f"'{kind}', sum(kind_{number})")
    return ",\n           ".join(counts), ", ".join(totals)


# An operator message the statement returns one by one (a stale match, or one of the first
# current corrections): its call, run, session, step, session position, and whether stale.
_MARKED = np.dtype(
    [("id", ">i8"), ("run", ">i8"), ("session", ">i8"), ("step", ">i4"), ("index", ">i4"),
     ("stale", ">i2")]
)  # fmt: skip


def corpus_load_grouped(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters,
    matcher: PhraseMatcher,
    rematched: Rematched | None = None,
) -> Corpus:
    """`post_compaction_rows.corpus_load_rows`, grouped in PostgreSQL (see the module)."""
    rows = _grouped_rows(workspace, filters, rematched)
    runs = _records(rows[0], _RUN)
    if len(runs) == 0:
        return _empty_corpus()
    labels = {int(grp): (str(task_type), str(trigger)) for grp, task_type, trigger in rows[1]}
    runs = runs[np.argsort(runs["id"], kind="stable")]
    run_ids, run_grp = runs["id"].astype(np.int64), runs["grp"].astype(np.int64)
    per_run = np.zeros((len(runs), len(_PER_RUN_FIELDS)), np.int64)
    per_group = np.zeros((len(labels), len(CLASS_STARTS), 4), np.int64)
    classes = _records(rows[2], _CLASSES)
    marked = _records(rows[3], _MARKED)
    stale = marked[marked["stale"] > 0]
    stale_hit = rematch(stale["id"].astype(np.int64), matcher, rematched) >= 0
    operator = np.zeros(len(classes) + int(stale_hit.sum()), _CLASS_COUNTS)
    operator[: len(classes)] = classes[["run", "cls", "n", "h"]]
    extra = operator[len(classes) :]  # each stale prompt that matched: one more correction
    extra["run"], extra["cls"], extra["h"] = (
        stale["run"][stale_hit],
        _class_of(stale["step"][stale_hit]) + 1,
        1,
    )
    tools = np.zeros(len(classes), _CLASS_COUNTS)
    tools["run"], tools["cls"], tools["n"], tools["h"] = (
        classes["run"],
        classes["cls"],
        classes["t"],
        classes["e"],
    )
    _count_classes(operator, run_ids, run_grp, per_run, per_group, 0)
    _count_classes(tools, run_ids, run_grp, per_run, per_group, 1)
    hits = np.concatenate([marked[marked["stale"] == 0], stale[stale_hit]])
    corrections = _observations(run_ids, run_grp, per_run[:, 0:6], per_group[:, :, 0:2])
    tool_results = _observations(run_ids, run_grp, per_run[:, 6:12], per_group[:, :, 2:4])
    task_types = np.array([labels[g][0] for g in range(len(labels))], dtype=object)
    triggers = np.array([labels[g][1] for g in range(len(labels))], dtype=object)
    ids = run_ids.tolist()
    return Corpus(
        corrections,
        tool_results,
        dict(zip(ids, task_types[run_grp].tolist(), strict=True)),
        dict(zip(ids, triggers[run_grp].tolist(), strict=True)),
        _audit_rows(hits, matcher, labels, run_ids, run_grp),
        {kind: int(n) for kind, n in sorted((rows[4] or {}).items()) if n},
        int(corrections.hit.sum()),
    )


def _grouped_rows(
    workspace: Workspace, filters: AnalyticsFilters, rematched: Rematched | None
) -> tuple:
    """The statement's one row (see GROUPED_SQL's columns)."""
    run_filters = ""
    if filters.task_type:
        run_filters += " AND r.task_type = %(task_type)s"
    if filters.harness:
        run_filters += " AND s.harness = %(harness)s"
    selected, selected_params = "", ()
    if filters.project or filters.harness or _call_level(filters):
        sql, selected_params = (
            selected_calls(workspace, filters).values("id").query.sql_with_params()
        )
        selected = f"AND c.id IN ({sql})"
    params = {
        "flagging": sorted(str(harness) for harness in HARNESSES_WITH_ERROR_FLAGS),
        "max_step": MAX_STEP,
        "workspace": workspace.pk,
        "task_type": filters.task_type,
        "harness": filters.harness,
        "starts": CLASS_STARTS.tolist(),
        "key": None if rematched is None else rematched.key,
        "everything": rematched is None,  # no stored match is current: all matched again
        "max_matches": MAX_MATCHES,
    }
    # The subquery's own %s placeholders, named so that they mix with the others.
    names = [f"selected_{k}" for k in range(len(selected_params))]
    params.update(zip(names, selected_params, strict=True))
    selected_named = selected % tuple(f"%({name})s" for name in names)
    with transaction.atomic(), connection.cursor() as cursor:
        # Compiling this statement took longer than running it (about 1.6 s at 1M calls).
        cursor.execute("SET LOCAL jit = off")
        cursor.execute("SET LOCAL work_mem = '64MB'")  # its sorts and hashes in memory
        kind_counts, kind_totals = _kind_columns()
        sql = GROUPED_SQL.format(
            run_filters=run_filters, selected=selected_named, kind_counts=kind_counts,
            kind_totals=kind_totals, current=CURRENT,
        )  # fmt: skip
        cursor.execute(sql, params)
        return cursor.fetchone()


def _records(data, dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype) if data else np.zeros(0, dtype)


def _class_of(step: np.ndarray) -> np.ndarray:
    """The 0-based class of each step."""
    return np.searchsorted(CLASS_STARTS, step.astype(np.int64), side="right") - 1


def _count_classes(counts, run_ids, run_grp, per_run, per_group, kind: int) -> None:
    """Add per-(run, class) counts (`kind` 0: operator messages, 1: tool results) to the
    per-run columns (steps 1–5, baseline, all) and the per-(group, class) counts."""
    row = np.searchsorted(run_ids, counts["run"].astype(np.int64))
    cls = counts["cls"].astype(np.int64) - 1
    n, h = counts["n"].astype(np.int64), counts["h"].astype(np.int64)
    first = np.isin(cls, CLASS_SEGMENTS["first"])
    base = np.isin(cls, CLASS_SEGMENTS["baseline"])
    offset = 6 * kind
    for column, values in enumerate((n * first, h * first, n * base, h * base, n, h)):
        np.add.at(per_run[:, offset + column], row, values)
    np.add.at(per_group[:, :, 2 * kind], (run_grp[row], cls), n)
    np.add.at(per_group[:, :, 2 * kind + 1], (run_grp[row], cls), h)


def _observations(run_ids, run_grp, per_run: np.ndarray, per_group: np.ndarray) -> Observations:
    """Observations with each run's counts in steps 1–5 and in the baseline, and each
    group's per class, as the statement counted them: every rate, the bins' and the
    bootstrap's over compactions, is then what the observations one by one would give.

    `per_run` columns: n and hits in steps 1–5, in the baseline, in all; `per_group`
    [group, class]: n and hits. Steps 1–5 are one class; in the baseline and the rest, a
    group's observations are given its runs' counts in run order and its classes' counts
    in class order (both sum to the same)."""
    order = np.lexsort((run_ids, run_grp))  # by group, then run
    runs, groups = run_ids[order], run_grp[order]
    counts = per_run[order]
    n_rest = counts[:, 4] - counts[:, 0] - counts[:, 2]
    h_rest = counts[:, 5] - counts[:, 1] - counts[:, 3]
    parts = {
        "first": (counts[:, 1], counts[:, 0] - counts[:, 1]),
        "baseline": (counts[:, 3], counts[:, 2] - counts[:, 3]),
        "middle": (h_rest, n_rest - h_rest),
    }
    run_parts, step_parts, hit_parts = [], [], []
    for segment, (hits, misses) in parts.items():
        classes = CLASS_SEGMENTS[segment]
        group_hits = per_group[:, classes, 1]
        group_misses = per_group[:, classes, 0] - group_hits
        for per_run_count, per_class_count, hit in (
            (hits, group_hits, True),
            (misses, group_misses, False),
        ):
            obs_runs = np.repeat(runs, per_run_count)
            obs_steps = np.repeat(
                np.tile(CLASS_STARTS[classes], len(per_class_count)), per_class_count.ravel()
            )
            if len(obs_runs) != len(obs_steps):
                raise RuntimeError(f"Counts by run and by class differ ({segment}).")
            run_parts.append(obs_runs)
            step_parts.append(obs_steps)
            hit_parts.append(np.full(len(obs_runs), hit))
    del groups
    return Observations(
        np.concatenate(run_parts), np.concatenate(step_parts), np.concatenate(hit_parts)
    )


def _audit_rows(hits, matcher, labels, run_ids, run_grp) -> list[dict]:
    """The first MAX_MATCHES corrections in run and step order, each with its matched
    text."""
    order = np.lexsort((hits["step"], hits["run"]))[:MAX_MATCHES]
    kept = hits[order]
    texts = _prompt_texts(kept["id"].astype(np.int64).tolist())
    grp_of = dict(zip(run_ids.tolist(), run_grp.tolist(), strict=True))
    matches = []
    for run, step, call, index, session in zip(
        *(
            kept[name].astype(np.int64).tolist()
            for name in ("run", "step", "id", "index", "session")
        ),
        strict=True,
    ):
        task_type, trigger = labels[grp_of[run]]
        prompt = texts[call]
        row_labels = {"trigger": trigger, "task_type": task_type}
        matches.append(
            _match_row(prompt, matcher.match(prompt), run, row_labels, session, index, step)
        )
    matches.sort(key=lambda m: (m["session"], m["call_index"]))
    return matches
