"""Recompute what depends on a session's whole call sequence: order, runs, compaction
sizes, file touches, agent and session totals. Runs under a row lock on the session so
that two workers finishing files of the same session do not interleave."""

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


def session_derive(*, session_id: int) -> None:
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(pk=session_id).first()
        if session is None:
            return
        with connection.cursor() as cursor:
            cursor.execute(REINDEX_SQL, [session_id])
        rows = list(
            Call.objects.filter(session_id=session_id)
            .order_by("session_index")
            .values_list(
                "id",
                "agent_id",
                "session_index",
                "timestamp",
                "context_tokens",
                "input_tokens",
                "cache_creation_tokens",
                "cache_read_tokens",
                "output_tokens",
                "tool_names",
                "touches",
                "model",
            )
        )
        calls = [
            CallRow(pk, agent, index, ts, ctx, i + cc + cr + out, sig, touches)
            for pk, agent, index, ts, ctx, i, cc, cr, out, sig, touches, _model in rows
        ]
        compaction_rows = list(
            Compaction.objects.filter(session_id=session_id).values_list(
                "id", "agent_id", "timestamp", "kind", "pre_tokens", "post_tokens"
            )
        )
        compaction_kinds = [row[3] for row in compaction_rows]
        compactions = [
            CompactionRow(pk, agent, ts, kind, pre, post)
            for pk, agent, ts, kind, pre, post in compaction_rows
        ]
        agent_rows = list(
            Agent.objects.filter(session_id=session_id).values_list(
                "id", "parent_id", "kind", "start_kind"
            )
        )
        agents = [(pk, parent, start) for pk, parent, _, start in agent_rows]
        agent_kinds = [(pk, parent, kind) for pk, parent, kind, _ in agent_rows]
        derived = derive_session(
            calls,
            compactions,
            parents={pk: parent for pk, parent, _ in agents},
            start_kinds={pk: kind for pk, _, kind in agents},
        )
        Compaction.objects.bulk_update(
            [
                Compaction(
                    pk=item.id,
                    before_call_index=item.before_call_index,
                    after_call_index=item.after_call_index,
                    pre_tokens=item.pre_tokens,
                    post_tokens=item.post_tokens,
                )
                for item in derived.compactions
            ],
            ["before_call_index", "after_call_index", "pre_tokens", "post_tokens"],
        )
        Run.objects.filter(session_id=session_id).delete()
        Run.objects.bulk_create(
            [
                Run(
                    workspace_id=session.workspace_id,
                    session_id=session_id,
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
                for run in derived.runs
            ],
            batch_size=1000,
        )
        FileTouch.objects.filter(session_id=session_id).delete()
        FileTouch.objects.bulk_create(
            [
                FileTouch(
                    workspace_id=session.workspace_id,
                    session_id=session_id,
                    agent_id=touch.agent,
                    run_index=touch.run_index,
                    call_index=touch.call_index,
                    path=touch.path,
                    mode=touch.mode,
                    token_position=touch.token_position,
                )
                for touch in derived.touches
            ],
            batch_size=2000,
        )
        start_kinds = {pk: kind for pk, _, kind in agents}
        Agent.objects.bulk_update(
            [
                Agent(
                    pk=agent.agent,
                    call_count=agent.call_count,
                    max_context=agent.max_context,
                    total_tokens=agent.total_tokens,
                    initial_context=agent.initial_context,
                    started_at=agent.started_at,
                    ended_at=agent.ended_at,
                    start_kind=agent.start_kind or start_kinds[agent.agent],
                )
                for agent in derived.agents
            ],
            [
                "call_count",
                "max_context",
                "total_tokens",
                "initial_context",
                "started_at",
                "ended_at",
                "start_kind",
            ],
        )
        models = Counter(row[-1] for row in rows if row[-1])
        compaction_agents = {pk for pk, _, kind in agent_kinds if kind == AgentKind.COMPACTION}
        Session.objects.filter(pk=session_id).update(
            agent_count=sum(1 for _, _, kind in agent_kinds if kind != AgentKind.COMPACTION),
            call_count=len(rows),
            compaction_count=sum(1 for c in compaction_kinds if c == "full"),
            input_tokens=sum(row[5] for row in rows),
            cache_creation_tokens=sum(row[6] for row in rows),
            cache_read_tokens=sum(row[7] for row in rows),
            output_tokens=sum(row[8] for row in rows),
            max_context=max((row[4] for row in rows if row[1] not in compaction_agents), default=0),
            started_at=rows[0][3] if rows else None,
            ended_at=max((row[3] for row in rows), default=None),
            model_names=[name for name, _ in models.most_common()],
        )
