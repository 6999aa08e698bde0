"""Every counted correction after compaction, for audit: each operator message the section
counts as a correction (`matches_total`), with its session, call, run, step, trigger, task
type, the phrase it matched, the text it matched and an excerpt (the rows of
`post_compaction_rows._match_row`). The cached section keeps only the first `MAX_MATCHES`;
these reads list them all, from the match stored with each call (`Call.correction_phrase`
under `Call.correction_key`), in chunks of calls whose prompt texts are read together.

A call whose stored match is stale (made under another phrase list or matcher revision,
or never) is matched here, with the workspace's current list, and marked `matched now`:
nothing is written (the analytics job stores such matches when it recomputes the
section). The observed runs and steps are those of the section: runs a full compaction
started on a main thread, step = agent_index − Run.first_agent_index + 1 up to MAX_STEP, the
same filters (on PostgreSQL one statement finds them, as `post_compaction_grouped` does;
elsewhere `post_compaction_rows.observed_calls`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from django.db import connection, transaction

from governance.models import Workspace
from traces.analysis.post_compaction import MAX_STEP, PhraseMatcher
from traces.analytics.post_compaction_rows import (
    _match_row,
    _prompt_texts,
    observed_calls,
    rematch,
)
from traces.analytics.post_compaction_selectors import phrase_list_current
from traces.analytics.selectors import AnalyticsFilters, _call_level, selected_calls

CHUNK = 2000  # corrections whose prompt texts are read (and rows made) at a time
MATCHED_NOW = "matched now"  # the stored match was stale: matched for this read
STORED = "stored"

# A candidate: an observed operator message whose stored match is a phrase, or is stale.
CANDIDATE = np.dtype(
    [("id", "i8"), ("run", "i8"), ("session", "i8"), ("step", "i8"), ("index", "i8"),
     ("phrase", "i8"), ("stale", "?")]
)  # fmt: skip
_PACKED = np.dtype(
    [("id", ">i8"), ("run", ">i8"), ("session", ">i8"), ("step", ">i4"), ("index", ">i4"),
     ("phrase", ">i2"), ("stale", ">i2"), ("grp", ">i4")]
)  # fmt: skip

# The observed runs as `post_compaction_grouped.GROUPED_SQL` selects them (and reads their
# first MAX_STEP calls from the (agent, agent_index) index); only operator messages that
# are a correction by their stored match, or whose match is stale, are returned.
# {run_filters}: task type and harness; {selected}: the call filters (a subquery), or nothing.
CANDIDATES_SQL = """
WITH runs AS MATERIALIZED (
    SELECT r.id, r.agent_id, r.session_id, r.task_type, k.trigger,
           dense_rank() OVER (ORDER BY r.task_type, k.trigger) - 1 AS grp,
           LEAST(r.call_count, %(max_step)s) AS n,
           COALESCE(r.first_agent_index, (
               SELECT min(c0.agent_index) FROM traces_call c0
               WHERE c0.session_id = r.session_id AND c0.session_index = r.first_call_index
                 AND c0.agent_id = r.agent_id
           )) AS lo
    FROM traces_run r
    JOIN traces_compaction k ON k.id = r.started_by_id AND k.kind = 'full'
    JOIN traces_agent a ON a.id = r.agent_id AND a.kind = 'main'
    JOIN traces_session s ON s.id = r.session_id
    WHERE r.workspace_id = %(workspace)s {run_filters}
)
SELECT
    (SELECT string_agg(int8send(c.id) || int8send(runs.id) || int8send(runs.session_id)
                       || int4send((c.agent_index - runs.lo + 1)::int4)
                       || int4send(c.session_index::int4)
                       || int2send(COALESCE(c.correction_phrase, -1)::int2)
                       || int2send((c.correction_key IS DISTINCT FROM %(key)s::int8)::int::int2)
                       || int4send(runs.grp::int4), ''::bytea)
     FROM runs CROSS JOIN LATERAL (
         SELECT c.id, c.agent_index, c.session_index, c.prompt_kind, c.correction_phrase,
                c.correction_key
         FROM traces_call c
         WHERE c.agent_id = runs.agent_id AND c.agent_index >= runs.lo
           AND c.agent_index < runs.lo + runs.n
     ) AS c
     WHERE c.prompt_kind = 'operator'
       AND (COALESCE(c.correction_phrase, -1) >= 0
            OR c.correction_key IS DISTINCT FROM %(key)s::int8) {selected}),
    (SELECT json_agg(json_build_array(grp, task_type, trigger))
     FROM (SELECT DISTINCT grp, task_type, trigger FROM runs) AS labels)
"""


@dataclass
class Corrections:
    """The counted corrections for some filters, in session and call order: `candidates`
    holds each one's call, run, session, step, session position and stored phrase index,
    and, while `resolved` is False, the stale ones not yet matched (which may match
    nothing). `labels`: run id → (task type, trigger)."""

    matcher: PhraseMatcher
    phrase_list_version: int
    candidates: np.ndarray
    labels: dict[int, tuple[str, str]]
    resolved: bool = False

    @property
    def stale(self) -> int:
        """Candidates whose stored match was stale (once resolved: those that match now)."""
        return int(self.candidates["stale"].sum())

    def __len__(self) -> int:
        """The number of counted corrections (stale matches resolved first)."""
        self.resolve()
        return len(self.candidates)

    def __getitem__(self, part: slice) -> list[dict]:
        """The rows of a slice of the corrections, their texts read in one go."""
        if not isinstance(part, slice):
            raise TypeError("Corrections are read by slices.")
        self.resolve()
        return self._rows(self.candidates[part])

    def resolve(self) -> None:
        """Match the stale candidates now (reading their texts a chunk at a time) and keep
        those that match; nothing is stored."""
        if self.resolved:
            return
        stale = np.flatnonzero(self.candidates["stale"])
        phrases = self.candidates["phrase"].copy()
        for start in range(0, len(stale), CHUNK):
            part = stale[start : start + CHUNK]
            phrases[part] = rematch(self.candidates["id"][part], self.matcher, None)
        self.candidates = self.candidates[phrases >= 0].copy()
        self.candidates["phrase"] = phrases[phrases >= 0]
        self.resolved = True

    def rows(self, chunk: int = CHUNK) -> Iterator[dict]:
        """Every counted correction's row, in order, reading `chunk` prompts at a time;
        stale matches are matched as their chunk is read (a stale one that matches
        nothing now is not a correction and is left out)."""
        for start in range(0, len(self.candidates), chunk):
            yield from self._rows(self.candidates[start : start + chunk])

    def _rows(self, part: np.ndarray) -> list[dict]:
        texts = _prompt_texts(part["id"].tolist())
        phrases = self.matcher.phrases
        rows = []
        for call, run, session, step, index, phrase, stale in zip(
            *(part[name].tolist() for name in CANDIDATE.names), strict=True
        ):
            prompt = texts.get(call) or ""
            found = self.matcher.match(prompt)
            if stale and found is None:
                continue
            if not stale and (found is None or found[0] != phrases[phrase]):
                # The text changed in place since its match was stored: the stored match is
                # what the section counted; what it matched is no longer in the text.
                found = (phrases[phrase], "")
            task_type, trigger = self.labels[run]
            row = _match_row(
                prompt, found, run, {"trigger": trigger, "task_type": task_type},
                session, index, step,
            )  # fmt: skip
            row["call"] = call
            row["match"] = MATCHED_NOW if stale else STORED
            rows.append(row)
        return rows


def corrections_for(*, workspace: Workspace, filters: AnalyticsFilters) -> Corrections:
    """The counted corrections of the workspace for these filters (see the module), under
    the workspace's current phrase list. Reads only: stale matches are matched as rows are
    made, or all at once by `len` and slicing (`Corrections.resolve`)."""
    phrases = phrase_list_current(workspace=workspace)
    matcher = PhraseMatcher(phrases.phrases)
    if connection.vendor == "postgresql":
        candidates, labels = _candidates_sql(workspace, filters, matcher.key)
    else:
        candidates, labels = _candidates_rows(workspace, filters, matcher.key)
    order = np.lexsort((candidates["index"], candidates["session"]))
    return Corrections(matcher, phrases.version, candidates[order], labels)


def _candidates_rows(workspace: Workspace, filters: AnalyticsFilters, key: int):
    runs, calls = observed_calls(workspace=workspace, filters=filters, key=key)
    if runs is None:
        return np.zeros(0, CANDIDATE), {}
    calls = calls[
        (calls["prompt_kind"] == "operator") & ((calls["correction_phrase"] >= 0) | calls["stale"])
    ]
    candidates = np.zeros(len(calls), CANDIDATE)
    for name, column in (("id", "id"), ("run", "run"), ("session", "session"), ("step", "step"),
                         ("index", "session_index"), ("phrase", "correction_phrase"),
                         ("stale", "stale")):  # fmt: skip
        candidates[name] = calls[column].to_numpy()
    labels = {
        int(run): (str(task_type), str(trigger))
        for run, task_type, trigger in zip(
            runs["id"].tolist(), runs["task_type"].tolist(), runs["trigger"].tolist(), strict=True
        )
    }
    return candidates, labels


def _candidates_sql(workspace: Workspace, filters: AnalyticsFilters, key: int):
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
        "max_step": MAX_STEP,
        "workspace": workspace.pk,
        "task_type": filters.task_type,
        "harness": filters.harness,
        "key": key,
    }
    # The subquery's own %s placeholders, named so that they mix with the others.
    names = [f"selected_{k}" for k in range(len(selected_params))]
    params.update(zip(names, selected_params, strict=True))
    selected = selected % tuple(f"%({name})s" for name in names)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")  # compiling costs more than running it
        cursor.execute(CANDIDATES_SQL.format(run_filters=run_filters, selected=selected), params)
        packed, groups = cursor.fetchone()
    records = np.frombuffer(bytes(packed), _PACKED) if packed else np.zeros(0, _PACKED)
    candidates = np.zeros(len(records), CANDIDATE)
    for name in CANDIDATE.names:
        candidates[name] = records[name] > 0 if name == "stale" else records[name]
    by_group = {
        int(grp): (str(task_type), str(trigger)) for grp, task_type, trigger in groups or []
    }
    labels = {
        int(run): by_group[int(grp)]
        for run, grp in zip(records["run"].tolist(), records["grp"].tolist(), strict=True)
    }
    return candidates, labels
