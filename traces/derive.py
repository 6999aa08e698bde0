"""Recompute what depends on a session's whole call sequence: order, runs, compaction
sizes, file touches, agent and session totals. Runs under a row lock on the session so
that two workers finishing files of the same session do not interleave."""

from __future__ import annotations

from collections import Counter

from django.db import connection, transaction
from django.db.models import Max, Min, Sum

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
        compactions = [
            CompactionRow(pk, agent, ts, kind, pre, post)
            for pk, agent, ts, kind, pre, post in Compaction.objects.filter(
                session_id=session_id
            ).values_list("id", "agent_id", "timestamp", "kind", "pre_tokens", "post_tokens")
        ]
        agents = list(
            Agent.objects.filter(session_id=session_id).values_list("id", "parent_id", "start_kind")
        )
        derived = derive_session(
            calls,
            compactions,
            parents={pk: parent for pk, parent, _ in agents},
            start_kinds={pk: kind for pk, _, kind in agents},
        )
        for item in derived.compactions:
            Compaction.objects.filter(pk=item.id).update(
                before_call_index=item.before_call_index,
                after_call_index=item.after_call_index,
                pre_tokens=item.pre_tokens,
                post_tokens=item.post_tokens,
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
        for agent in derived.agents:
            updates = {
                "call_count": agent.call_count,
                "max_context": agent.max_context,
                "total_tokens": agent.total_tokens,
                "initial_context": agent.initial_context,
                "started_at": agent.started_at,
                "ended_at": agent.ended_at,
            }
            if agent.start_kind:
                updates["start_kind"] = agent.start_kind
            Agent.objects.filter(pk=agent.agent).update(**updates)
        totals = Call.objects.filter(session_id=session_id).aggregate(
            input=Sum("input_tokens"),
            cache_creation=Sum("cache_creation_tokens"),
            cache_read=Sum("cache_read_tokens"),
            output=Sum("output_tokens"),
            max_context=Max("context_tokens"),
            started=Min("timestamp"),
            ended=Max("timestamp"),
        )
        models = Counter(row[-1] for row in rows if row[-1])
        Session.objects.filter(pk=session_id).update(
            agent_count=Agent.objects.filter(session_id=session_id)
            .exclude(kind=AgentKind.COMPACTION)
            .count(),
            call_count=len(rows),
            compaction_count=Compaction.objects.filter(session_id=session_id, kind="full").count(),
            input_tokens=totals["input"] or 0,
            cache_creation_tokens=totals["cache_creation"] or 0,
            cache_read_tokens=totals["cache_read"] or 0,
            output_tokens=totals["output"] or 0,
            max_context=totals["max_context"] or 0,
            started_at=totals["started"],
            ended_at=totals["ended"],
            model_names=[name for name, _ in models.most_common()],
        )
