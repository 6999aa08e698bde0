"""Recompute what depends on a session's whole call sequence: order, runs, compaction
sizes, file touches, agent and session totals. Runs under a row lock on the session so
that two workers finishing files of the same session do not interleave.

Deriving a session clears its `needs_derive` mark in the same transaction, under that
lock: a worker killed mid-derive leaves the mark, and a loader that marks a session after
its calls commit waits for the lock, so its mark is never cleared by a derive that could
not see those calls.

Runs keep their ids across re-derivation (they are upserted by agent and index), because
specifications and annotations link to them; file touches are rebuilt.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import orjson
from django.db import connection, transaction

from traces.analysis.segments import CallRow, CompactionRow, derive_session
from traces.analytics.instruction_visibility_extracts import extracts_after_derive
from traces.models import Agent, AgentKind, Call, Compaction, FileTouch, Run, Session

# {sessions} is "= %s" (one session) or "= ANY(%s)" (a list, PostgreSQL).
REINDEX_SQL = """
UPDATE traces_call SET session_index = ordered.session_index, agent_index = ordered.agent_index
FROM (
    SELECT id,
           ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY timestamp, source_line, id) - 1
               AS session_index,
           ROW_NUMBER() OVER (PARTITION BY agent_id ORDER BY timestamp, source_line, id) - 1
               AS agent_index
    FROM traces_call WHERE session_id {sessions}
) AS ordered
WHERE traces_call.id = ordered.id
  AND (traces_call.session_index != ordered.session_index OR traces_call.agent_index != ordered.agent_index)
"""
CALLS_SQL = """
SELECT session_id, id, agent_id, session_index, timestamp, context_tokens, input_tokens,
       cache_creation_tokens, cache_read_tokens, output_tokens, tool_names, touches, model
FROM traces_call WHERE session_id = ANY(%s) ORDER BY session_id, session_index
"""
LOCK_SQL = """
SELECT id, workspace_id FROM traces_session WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE
"""
# Sessions derived together, in one transaction with shared statements. Small enough that
# the session locks are held briefly (OTLP requests marking a session wait for them).
DERIVE_GROUP = 100
CALL_FIELDS = (
    "id", "agent_id", "session_index", "timestamp", "context_tokens", "input_tokens",
    "cache_creation_tokens", "cache_read_tokens", "output_tokens", "tool_names", "touches", "model",
)  # fmt: skip
RUN_COLUMNS = (
    "workspace_id", "session_id", "agent_id", "index", "started_by_id", "first_call_index",
    "last_call_index", "call_count", "first_agent_index", "max_context", "median_context", "task_type",
    "task_type_reason", "started_at", "ended_at",
)  # fmt: skip
TOUCH_COLUMNS = (
    "workspace_id",
    "session_id",
    "agent_id",
    "run_index",
    "call_index",
    "path",
    "mode",
    "token_position",
)


def sessions_derive_many(*, session_ids) -> None:
    """Derive sessions from their stored calls: on PostgreSQL DERIVE_GROUP at a time, each
    group in one transaction with one statement per kind of row; elsewhere one by one."""
    ids = sorted(set(session_ids))
    postgres = connection.vendor == "postgresql"
    step = DERIVE_GROUP if postgres else 1
    for start in range(0, len(ids), step):
        group = ids[start : start + step]
        with transaction.atomic():
            # NO KEY UPDATE: derivations of one session wait for each other, but loaders
            # inserting calls (whose foreign-key checks take KEY SHARE) do not wait for them.
            if postgres:
                with connection.cursor() as cursor:
                    cursor.execute(LOCK_SQL, [group])
                    sessions = [Session(pk=pk, workspace_id=ws) for pk, ws in cursor.fetchall()]
            else:
                sessions = list(
                    Session.objects.select_for_update(no_key=True)
                    .filter(pk__in=group)
                    .only("id", "workspace_id")
                )
            if sessions:
                _derive_from_database(sessions)


# Runs stored without their first call's agent position (before migration 0015, or
# loaded by other means than derivation): filled set-based from that call.
RUN_FIRST_AGENT_INDEX_SQL = """
UPDATE traces_run SET first_agent_index = (
    SELECT min(c.agent_index) FROM traces_call c
    WHERE c.session_id = traces_run.session_id AND c.session_index = traces_run.first_call_index
      AND c.agent_id = traces_run.agent_id
)
WHERE first_agent_index IS NULL AND workspace_id = %s
"""


def runs_fill_first_agent_index(*, workspace_id: int) -> int:
    """Fill `Run.first_agent_index` where it is null; the number of runs filled."""
    with connection.cursor() as cursor:
        cursor.execute(RUN_FIRST_AGENT_INDEX_SQL, [workspace_id])
        return cursor.rowcount


def _derive_from_database(sessions: list[Session]) -> None:
    """Re-index, read back and derive sessions the caller has locked."""
    ids = [session.pk for session in sessions]
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute(REINDEX_SQL.format(sessions="= ANY(%s)"), [ids])
            cursor.execute(CALLS_SQL, [ids])
            rows = cursor.fetchall()
        else:
            for pk in ids:
                cursor.execute(REINDEX_SQL.format(sessions="= %s"), [pk])
    if not postgres:
        # Other backends return raw timestamps as naive values; let the ORM convert them.
        rows = list(
            Call.objects.filter(session_id__in=ids)
            .order_by("session_id", "session_index")
            .values_list("session_id", *CALL_FIELDS)
        )
    calls = _by_session(ids, rows)
    compactions = _by_session(
        ids,
        Compaction.objects.filter(session_id__in=ids).values_list("session_id", *COMPACTION_FIELDS),
    )
    agents = _by_session(
        ids, Agent.objects.filter(session_id__in=ids).values_list("session_id", *AGENT_FIELDS)
    )
    # Sessions never derived have no runs or touches yet: theirs are simply inserted.
    derived_before = set(
        Run.objects.filter(session_id__in=ids).values_list("session_id", flat=True).distinct()
    ) | set(
        FileTouch.objects.filter(session_id__in=ids).values_list("session_id", flat=True).distinct()
    )
    writes = _Writes()
    for session in sessions:
        _derive(
            session,
            calls[session.pk],
            compactions[session.pk],
            agents[session.pk],
            writes,
            fresh=session.pk not in derived_before,
        )
    writes.store()


def _by_session(ids: list[int], rows) -> dict[int, list[tuple]]:
    grouped: dict[int, list[tuple]] = {pk: [] for pk in ids}
    for session_id, *row in rows:
        grouped[session_id].append(tuple(row))
    return grouped


# Run after LOCK_SQL, as its own statement: a statement that waited for a row lock keeps
# the snapshot it started with, so a check in the locking statement itself would miss the
# runs of a derivation that committed while it waited.
LOADED_CHECK_SQL = """
SELECT s.id,
       (SELECT count(*) FROM traces_call c WHERE c.session_id = s.id),
       EXISTS (SELECT 1 FROM traces_run r WHERE r.session_id = s.id)
FROM traces_session s WHERE s.id = ANY(%s) ORDER BY s.id
"""


def sessions_derive_loaded(*, workspace_id: int, calls: dict[int, list[tuple]]) -> None:
    """Derive sessions a loader has just created, from the call rows it wrote.

    `calls` maps session id to rows shaped like CALL_FIELDS, already in session order.
    This skips the re-index and the read-back of every call that `sessions_derive_many` needs
    when calls may come from several files or out of order, and the sessions share each
    statement. A session that another loader has meanwhile added calls to, or derived,
    is derived from the database instead. PostgreSQL only; runs in the caller's
    transaction."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK_SQL, [sorted(calls)])
        cursor.execute(LOADED_CHECK_SQL, [list(calls)])
        states = cursor.fetchall()
    fresh = [pk for pk, stored, has_runs in states if stored == len(calls[pk]) and not has_runs]
    stale = sorted({pk for pk, _, _ in states} - set(fresh))
    if stale:
        _derive_from_database([Session(pk=pk, workspace_id=workspace_id) for pk in stale])
    compactions = _by_session(
        fresh,
        Compaction.objects.filter(session_id__in=fresh).values_list(
            "session_id", *COMPACTION_FIELDS
        ),
    )
    agents = _by_session(
        fresh, Agent.objects.filter(session_id__in=fresh).values_list("session_id", *AGENT_FIELDS)
    )
    writes = _Writes()
    for session_id in fresh:
        _derive(
            Session(pk=session_id, workspace_id=workspace_id),
            calls[session_id],
            compactions[session_id],
            agents[session_id],
            writes,
        )
    writes.store()


COMPACTION_FIELDS = ("id", "agent_id", "timestamp", "kind", "pre_tokens", "post_tokens")
AGENT_FIELDS = ("id", "parent_id", "kind", "start_kind")
COMPACTION_SQL = (
    "UPDATE traces_compaction SET before_call_index = %s, after_call_index = %s, "
    "pre_tokens = %s, post_tokens = %s WHERE id = %s"
)
AGENT_SQL = (
    "UPDATE traces_agent SET call_count = %s, max_context = %s, total_tokens = %s, "
    "initial_context = %s, started_at = %s, ended_at = %s, start_kind = %s WHERE id = %s"
)
SESSION_UPDATED = (
    "agent_count", "call_count", "compaction_count", "input_tokens", "cache_creation_tokens",
    "cache_read_tokens", "output_tokens", "max_context", "started_at", "ended_at", "model_names",
)  # fmt: skip
SESSION_SQL = (
    "UPDATE traces_session SET needs_derive = false, "  # noqa: S608 (constant column names)
    + ", ".join(f"{column} = %s" for column in SESSION_UPDATED)
    + " WHERE id = %s"
)


@dataclass
class _Writes:
    """What derivation writes, gathered so that several sessions share each statement.

    Plain executemany (pipelined by psycopg) instead of bulk_update: the ORM's CASE
    expressions cost far more Python time than the statements cost the database."""

    compactions: list[tuple] = field(default_factory=list)
    agents: list[tuple] = field(default_factory=list)
    sessions: list[tuple] = field(default_factory=list)
    new_runs: list[Run] = field(default_factory=list)  # of fresh sessions: COPY
    new_touches: list[tuple] = field(default_factory=list)  # of fresh sessions: COPY

    def store(self) -> None:
        _update_many(COMPACTION_SQL, self.compactions)
        if self.new_runs:
            if connection.vendor == "postgresql":
                _copy_rows(
                    "traces_run",
                    RUN_COLUMNS,
                    ([getattr(run, c) for c in RUN_COLUMNS] for run in self.new_runs),
                )
            else:
                Run.objects.bulk_create(self.new_runs, batch_size=1000)
        if self.new_touches:
            _insert_touches(self.new_touches)
        _update_many(AGENT_SQL, self.agents)
        if connection.vendor == "postgresql":
            _update_many(SESSION_SQL, self.sessions)
            return
        for *values, pk in self.sessions:  # let the ORM store dates the way it reads them
            values[-1] = orjson.loads(values[-1])
            Session.objects.filter(pk=pk).update(
                needs_derive=False, **dict(zip(SESSION_UPDATED, values, strict=True))
            )


def _derive(
    session: Session,
    rows: list[tuple],
    compaction_rows: list[tuple],
    agent_rows: list[tuple],
    writes: _Writes,
    *,
    fresh: bool = True,
) -> None:
    """Add one session's derived rows to `writes`. Runs and touches of a session that may
    have some already (not `fresh`) are reconciled with them here."""
    derived = _derive_calls(rows, compaction_rows, agent_rows)
    writes.compactions.extend(
        (c.before_call_index, c.after_call_index, c.pre_tokens, c.post_tokens, c.id)
        for c in derived.compactions
    )
    _add_runs_and_touches(session, derived, writes, fresh=fresh)
    start_kinds = {pk: start for pk, _, _, start in agent_rows}
    writes.agents.extend(
        (a.call_count, a.max_context, a.total_tokens, a.initial_context, a.started_at, a.ended_at,
         a.start_kind or start_kinds[a.agent], a.agent)
        for a in derived.agents
    )  # fmt: skip
    writes.sessions.append(_session_totals(session, rows, compaction_rows, agent_rows))
    extracts_after_derive(workspace_id=session.workspace_id, session_id=session.pk)


def _derive_calls(rows: list[tuple], compaction_rows: list[tuple], agent_rows: list[tuple]):
    """The session's runs, touches, compaction sizes and agent totals from its rows."""
    calls = [
        CallRow(pk, agent, index, ts, ctx, i + cc + cr + out, sig, touches)
        for pk, agent, index, ts, ctx, i, cc, cr, out, sig, touches, _model in rows
    ]
    return derive_session(
        calls,
        [CompactionRow(*row) for row in compaction_rows],
        parents={pk: parent for pk, parent, _, _ in agent_rows},
        start_kinds={pk: start for pk, _, _, start in agent_rows},
    )


def _add_runs_and_touches(session: Session, derived, writes: _Writes, *, fresh: bool) -> None:
    """A fresh session's runs and touches are COPYed with the group; a session derived
    before has its runs upserted (keeping their ids) and its touches replaced now."""
    runs = _run_objects(session, derived.runs)
    touches = _touch_rows(session, derived.touches)
    if fresh:
        writes.new_runs.extend(runs)
        writes.new_touches.extend(touches)
        return
    _store_runs(session, runs)
    FileTouch.objects.filter(session_id=session.pk).delete()
    if touches:
        _insert_touches(touches)


def _session_totals(
    session: Session, rows: list[tuple], compaction_rows: list[tuple], agent_rows: list[tuple]
) -> tuple:
    """The values of SESSION_UPDATED, then the session's id (SESSION_SQL's parameters)."""
    compaction_agents = {pk for pk, _, kind, _ in agent_rows if kind == AgentKind.COMPACTION}
    return (
        len(agent_rows) - len(compaction_agents),
        len(rows),
        sum(1 for row in compaction_rows if row[3] == "full"),
        *_call_totals(rows, compaction_agents),
        session.pk,
    )


def _call_totals(rows: list[tuple], compaction_agents: set[int]) -> tuple:
    """Token sums, the largest context outside compaction agents, the first and last
    timestamps and the models by use (SESSION_UPDATED from input_tokens on)."""
    models = Counter(row[11] for row in rows if row[11])
    return (
        sum(row[5] for row in rows),
        sum(row[6] for row in rows),
        sum(row[7] for row in rows),
        sum(row[8] for row in rows),
        max((row[4] for row in rows if row[1] not in compaction_agents), default=0),
        rows[0][3] if rows else None,
        max((row[3] for row in rows), default=None),
        orjson.dumps([name for name, _ in models.most_common()]).decode(),
    )


def _run_objects(session: Session, runs) -> list[Run]:
    """The runs as rows, each with the agent position of its first call: a run's calls are
    the next `call_count` of its agent's calls, runs in index order (`derive_session`)."""
    before: dict[int, int] = {}  # agent -> calls of its runs so far
    objects = []
    for run in runs:  # by agent, each agent's in index order
        first = before.get(run.agent, 0)
        before[run.agent] = first + run.call_count
        objects.append(_run_object(session, run, first))
    return objects


def _run_object(session: Session, run, first_agent_index: int) -> Run:
    return Run(
        workspace_id=session.workspace_id,
        session_id=session.pk,
        agent_id=run.agent,
        index=run.index,
        started_by_id=run.started_by,
        first_call_index=run.first_call_index,
        last_call_index=run.last_call_index,
        call_count=run.call_count,
        first_agent_index=first_agent_index,
        max_context=run.max_context,
        median_context=run.median_context,
        task_type=run.task_type,
        task_type_reason=run.task_type_reason,
        started_at=run.started_at,
        ended_at=run.ended_at,
    )


def _touch_rows(session: Session, touches) -> list[tuple]:
    return [
        (session.workspace_id, session.pk, t.agent, t.run_index, t.call_index, t.path, t.mode,
         t.token_position)
        for t in touches
    ]  # fmt: skip


def _store_runs(session: Session, objects: list[Run]) -> None:
    """Upsert by (agent, index), keeping ids: specifications and annotations link to runs."""
    existing = {
        (agent, index): pk
        for pk, agent, index in Run.objects.filter(session=session).values_list(
            "id", "agent_id", "index"
        )
    }
    for run in objects:
        run.pk = existing.get((run.agent_id, run.index))
    keep = {(run.agent_id, run.index) for run in objects}
    stale = [pk for key, pk in existing.items() if key not in keep]
    if stale:
        Run.objects.filter(pk__in=stale).delete()
    _update_many(
        "UPDATE traces_run SET started_by_id = %s, first_call_index = %s, last_call_index = %s, call_count = %s, "
        "first_agent_index = %s, max_context = %s, median_context = %s, task_type = %s, task_type_reason = %s, started_at = %s, ended_at = %s "
        "WHERE id = %s",
        [
            (o.started_by_id, o.first_call_index, o.last_call_index, o.call_count, o.first_agent_index, o.max_context, o.median_context,
             o.task_type, o.task_type_reason, o.started_at, o.ended_at, o.pk)
            for o in objects
            if o.pk is not None
        ],
    )  # fmt: skip
    Run.objects.bulk_create([obj for obj in objects if obj.pk is None], batch_size=1000)


def _copy_rows(table: str, columns: tuple[str, ...], rows) -> None:
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


def _update_many(sql: str, rows: list[tuple]) -> None:
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _insert_touches(rows: list[tuple]) -> None:
    if connection.vendor == "postgresql":
        _copy_rows("traces_filetouch", TOUCH_COLUMNS, rows)
        return
    FileTouch.objects.bulk_create(
        [FileTouch(**dict(zip(TOUCH_COLUMNS, row, strict=True))) for row in rows], batch_size=2000
    )
