"""Recompute what depends on a session's whole call sequence: order, runs, compaction
sizes, file touches, agent and session totals. Runs under a row lock on the session so
that two workers finishing files of the same session do not interleave.

Runs keep their ids across re-derivation (they are upserted by agent and index), because
specifications and annotations link to them; file touches are rebuilt.
"""

from __future__ import annotations

from collections import Counter

from django.db import connection, transaction

from traces.analysis.segments import CallRow, CompactionRow, derive_session
from traces.models import Agent, AgentKind, Call, Compaction, FileTouch, Run, Session

REINDEX_SQL = """
UPDATE traces_call SET session_index = ordered.session_index, agent_index = ordered.agent_index
FROM (
    SELECT id,
           ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY timestamp, source_file_id, source_line, id) - 1
               AS session_index,
           ROW_NUMBER() OVER (PARTITION BY agent_id ORDER BY timestamp, source_file_id, source_line, id) - 1
               AS agent_index
    FROM traces_call WHERE session_id = %s
) AS ordered
WHERE traces_call.id = ordered.id
  AND (traces_call.session_index != ordered.session_index OR traces_call.agent_index != ordered.agent_index)
"""
CALLS_SQL = """
SELECT id, agent_id, session_index, timestamp, context_tokens, input_tokens, cache_creation_tokens,
       cache_read_tokens, output_tokens, tool_names, touches, model
FROM traces_call WHERE session_id = %s ORDER BY session_index
"""
CALL_FIELDS = (
    "id", "agent_id", "session_index", "timestamp", "context_tokens", "input_tokens",
    "cache_creation_tokens", "cache_read_tokens", "output_tokens", "tool_names", "touches", "model",
)  # fmt: skip
RUN_COLUMNS = (
    "workspace_id", "session_id", "agent_id", "index", "started_by_id", "first_call_index",
    "last_call_index", "call_count", "max_context", "median_context", "task_type",
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


def session_derive(*, session_id: int) -> None:
    with transaction.atomic():
        # NO KEY UPDATE: derivations of one session wait for each other, but loaders
        # inserting calls (whose foreign-key checks take KEY SHARE) do not wait for them.
        session = Session.objects.select_for_update(no_key=True).filter(pk=session_id).first()
        if session is None:
            return
        _derive_from_database(session)


def _derive_from_database(session: Session) -> None:
    with connection.cursor() as cursor:
        cursor.execute(REINDEX_SQL, [session.pk])
        if connection.vendor == "postgresql":
            cursor.execute(CALLS_SQL, [session.pk])
            rows = cursor.fetchall()
    if connection.vendor != "postgresql":
        # Other backends return raw timestamps as naive values; let the ORM convert them.
        rows = list(
            Call.objects.filter(session_id=session.pk)
            .order_by("session_index")
            .values_list(*CALL_FIELDS)
        )
    _derive_and_store(session, rows, fresh=False)


LOADED_CHECK_SQL = """
SELECT s.id,
       (SELECT count(*) FROM traces_call c WHERE c.session_id = s.id),
       EXISTS (SELECT 1 FROM traces_run r WHERE r.session_id = s.id)
FROM traces_session s WHERE s.id = ANY(%s) ORDER BY s.id FOR NO KEY UPDATE OF s
"""


def sessions_derive_loaded(*, workspace_id: int, calls: dict[int, list[tuple]]) -> None:
    """Derive sessions a loader has just created, from the call rows it wrote.

    `calls` maps session id to rows shaped like CALL_FIELDS, already in session order.
    This skips the re-index and the read-back of every call that `session_derive` needs
    when calls may come from several files or out of order. A session that another
    loader has meanwhile added calls to, or derived, is derived from the database
    instead. PostgreSQL only; runs in the caller's transaction."""
    with connection.cursor() as cursor:
        cursor.execute(LOADED_CHECK_SQL, [list(calls)])
        states = cursor.fetchall()
    for session_id, stored_calls, has_runs in states:
        session = Session(pk=session_id, workspace_id=workspace_id)
        rows = calls[session_id]
        if stored_calls == len(rows) and not has_runs:
            _derive_and_store(session, rows, fresh=True)
        else:
            _derive_from_database(session)


def _derive_and_store(session: Session, rows: list[tuple], *, fresh: bool) -> None:
    """`rows` are the session's calls in session order, shaped like CALL_FIELDS."""
    session_id = session.pk
    calls = [
        CallRow(pk, agent, index, ts, ctx, i + cc + cr + out, sig, touches)
        for pk, agent, index, ts, ctx, i, cc, cr, out, sig, touches, _model in rows
    ]
    compaction_rows = list(
        Compaction.objects.filter(session_id=session_id).values_list(
            "id", "agent_id", "timestamp", "kind", "pre_tokens", "post_tokens"
        )
    )
    agent_rows = list(
        Agent.objects.filter(session_id=session_id).values_list(
            "id", "parent_id", "kind", "start_kind"
        )
    )
    derived = derive_session(
        calls,
        [CompactionRow(*row) for row in compaction_rows],
        parents={pk: parent for pk, parent, _, _ in agent_rows},
        start_kinds={pk: start for pk, _, _, start in agent_rows},
    )
    # Plain executemany (pipelined by psycopg) instead of bulk_update: the ORM's CASE
    # expressions cost far more Python time than the statements cost the database.
    _update_many(
        "UPDATE traces_compaction SET before_call_index = %s, after_call_index = %s, pre_tokens = %s, post_tokens = %s WHERE id = %s",
        [
            (c.before_call_index, c.after_call_index, c.pre_tokens, c.post_tokens, c.id)
            for c in derived.compactions
        ],
    )
    _store_runs(session, derived.runs, fresh=fresh)
    _store_touches(session, derived.touches, fresh=fresh)
    start_kinds = {pk: start for pk, _, _, start in agent_rows}
    _update_many(
        "UPDATE traces_agent SET call_count = %s, max_context = %s, total_tokens = %s, initial_context = %s, "
        "started_at = %s, ended_at = %s, start_kind = %s WHERE id = %s",
        [
            (a.call_count, a.max_context, a.total_tokens, a.initial_context, a.started_at, a.ended_at,
             a.start_kind or start_kinds[a.agent], a.agent)
            for a in derived.agents
        ],
    )  # fmt: skip
    compaction_agents = {pk for pk, _, kind, _ in agent_rows if kind == AgentKind.COMPACTION}
    models = Counter(row[11] for row in rows if row[11])
    Session.objects.filter(pk=session_id).update(
        agent_count=sum(1 for _, _, kind, _ in agent_rows if kind != AgentKind.COMPACTION),
        call_count=len(rows),
        compaction_count=sum(1 for row in compaction_rows if row[3] == "full"),
        input_tokens=sum(row[5] for row in rows),
        cache_creation_tokens=sum(row[6] for row in rows),
        cache_read_tokens=sum(row[7] for row in rows),
        output_tokens=sum(row[8] for row in rows),
        max_context=max((row[4] for row in rows if row[1] not in compaction_agents), default=0),
        started_at=rows[0][3] if rows else None,
        ended_at=max((row[3] for row in rows), default=None),
        model_names=[name for name, _ in models.most_common()],
    )


def _store_runs(session: Session, runs, *, fresh: bool) -> None:
    existing = {}
    if not fresh:  # a session created by this transaction has no runs yet
        existing = {
            (agent, index): pk
            for pk, agent, index in Run.objects.filter(session=session).values_list(
                "id", "agent_id", "index"
            )
        }
    objects = [
        Run(
            pk=existing.get((run.agent, run.index)),
            workspace_id=session.workspace_id,
            session_id=session.pk,
            agent_id=run.agent,
            index=run.index,
            started_by_id=run.started_by,
            first_call_index=run.first_call_index,
            last_call_index=run.last_call_index,
            call_count=run.call_count,
            max_context=run.max_context,
            median_context=run.median_context,
            task_type=run.task_type,
            task_type_reason=run.task_type_reason,
            started_at=run.started_at,
            ended_at=run.ended_at,
        )
        for run in runs
    ]
    keep = {(run.agent, run.index) for run in runs}
    stale = [pk for key, pk in existing.items() if key not in keep]
    if stale:
        Run.objects.filter(pk__in=stale).delete()
    _update_many(
        "UPDATE traces_run SET started_by_id = %s, first_call_index = %s, last_call_index = %s, call_count = %s, "
        "max_context = %s, median_context = %s, task_type = %s, task_type_reason = %s, started_at = %s, ended_at = %s "
        "WHERE id = %s",
        [
            (o.started_by_id, o.first_call_index, o.last_call_index, o.call_count, o.max_context, o.median_context,
             o.task_type, o.task_type_reason, o.started_at, o.ended_at, o.pk)
            for o in objects
            if o.pk is not None
        ],
    )  # fmt: skip
    new_runs = [obj for obj in objects if obj.pk is None]
    if fresh and new_runs and connection.vendor == "postgresql":
        _copy_rows(
            "traces_run", RUN_COLUMNS, [[getattr(o, c) for c in RUN_COLUMNS] for o in new_runs]
        )
        return
    Run.objects.bulk_create(new_runs, batch_size=1000)


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


def _store_touches(session: Session, touches, *, fresh: bool) -> None:
    if not fresh:
        FileTouch.objects.filter(session_id=session.pk).delete()
    if not touches:
        return
    rows = [
        (
            session.workspace_id,
            session.pk,
            t.agent,
            t.run_index,
            t.call_index,
            t.path,
            t.mode,
            t.token_position,
        )
        for t in touches
    ]
    if connection.vendor == "postgresql":
        _copy_rows("traces_filetouch", TOUCH_COLUMNS, rows)
        return
    FileTouch.objects.bulk_create(
        [FileTouch(**dict(zip(TOUCH_COLUMNS, row, strict=True))) for row in rows], batch_size=2000
    )
