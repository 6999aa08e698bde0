"""Reads for traces, always scoped to a workspace."""

from __future__ import annotations

from datetime import UTC

from django.db.models import QuerySet
from django.http import Http404

from governance.models import Workspace
from traces.models import Agent, Call, Compaction, IngestedFile, JobFile, RawUpload, Run, Session

TIMELINE_MAX_POINTS = 5000


def sessions_for(*, workspace: Workspace) -> QuerySet[Session]:
    return Session.objects.filter(workspace=workspace)


def sessions_of_job(*, job_id: int) -> QuerySet[Session]:
    """Sessions that the files of an ingest job (read, or found already read) held calls of."""
    files = JobFile.objects.filter(job_id=job_id).values("file_id")
    links = IngestedFile.sessions.through.objects.filter(ingestedfile_id__in=files)
    return Session.objects.filter(pk__in=links.values("session_id"))


def session_uploads(*, session: Session, limit: int = 5) -> list[dict]:
    """The latest ingest jobs that read this session's files: {job_id, member, read}."""
    links = (
        JobFile.objects.filter(file__sessions=session)
        .order_by("-job_id", "file__member")
        .values("job_id", "file__member", "read")[:limit]
    )
    return [{"job_id": r["job_id"], "member": r["file__member"], "read": r["read"]} for r in links]


def job_files(*, job_id: int) -> QuerySet[JobFile]:
    """An ingest job's files, each with the sessions it held calls of."""
    return (
        JobFile.objects.filter(job_id=job_id)
        .select_related("file")
        .prefetch_related("file__sessions")
        .order_by("-read", "file__member", "pk")
    )


def session_get(*, workspace: Workspace, pk: int) -> Session:
    session = sessions_for(workspace=workspace).filter(pk=pk).first()
    if session is None:
        raise Http404("No such session in this workspace.")
    return session


def session_calls(*, session: Session) -> QuerySet[Call]:
    return Call.objects.filter(session=session).select_related("agent").order_by("session_index")


def session_compactions(*, session: Session) -> QuerySet[Compaction]:
    return (
        Compaction.objects.filter(session=session)
        .select_related("agent")
        .order_by("timestamp", "id")
    )


def session_runs(*, session: Session) -> QuerySet[Run]:
    return (
        Run.objects.filter(session=session)
        .select_related("agent")
        .order_by("agent__started_at", "agent_id", "index")
    )


def session_agents(*, session: Session) -> QuerySet[Agent]:
    return (
        Agent.objects.filter(session=session).select_related("parent").order_by("started_at", "id")
    )


def session_timeline(*, session: Session) -> dict:
    """Context per call for each agent as columns (not model instances), for the chart."""
    rows = (
        Call.objects.filter(session=session)
        .order_by("session_index")
        .values_list("session_index", "agent_id", "context_tokens", "timestamp")
    )
    series: dict[int, dict[str, list]] = {}
    for index, agent, context, timestamp in rows:
        column = series.setdefault(agent, {"index": [], "context": [], "time": []})
        column["index"].append(index)
        column["context"].append(context)
        column["time"].append(timestamp.isoformat())
    return series


def recent_uploads(*, workspace: Workspace, limit: int = 20) -> QuerySet[RawUpload]:
    return (
        RawUpload.objects.filter(workspace=workspace)
        .select_related("job")
        .order_by("-created_at")[:limit]
    )


def workspace_trace_totals(*, workspace: Workspace) -> dict:
    from django.db.models import Count, Max, Sum

    return Session.objects.filter(workspace=workspace).aggregate(
        sessions=Count("id"),
        calls=Sum("call_count"),
        compactions=Sum("compaction_count"),
        input=Sum("input_tokens"),
        cache_creation=Sum("cache_creation_tokens"),
        cache_read=Sum("cache_read_tokens"),
        output=Sum("output_tokens"),
        max_context=Max("max_context"),
        last_started=Max("started_at"),
    )


def telemetry_policy_peek(*, workspace):
    """The workspace's telemetry policy, or the defaults (unsaved) if it has none yet."""
    from traces.models import TelemetryPolicy

    return TelemetryPolicy.objects.filter(workspace=workspace).first() or TelemetryPolicy(
        workspace=workspace
    )


# --- reconciliation: one call, many sources -----------------------------------------------

RECONCILED_EVENTS = ("claude_code.api_request", "codex.sse_event")
_COUNT_COLUMNS = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens")


def session_reconciliation(*, session: Session, limit: int = 500):
    """Each call of the session with the counts of every source that saw it (the
    transcript's on the Call, a span's CallSource, a linked api_request event), and the
    events that name no stored call; compared by `traces.analysis.reconciliation`."""
    from traces.analysis.reconciliation import (
        CallSources,
        Reconciliation,
        SourceCounts,
        reconcile,
    )
    from traces.models import CallSource, TelemetryEvent

    events = TelemetryEvent.objects.filter(session=session, name__in=RECONCILED_EVENTS).exclude(
        input_tokens=None, output_tokens=None
    )
    if not events.exists() and not CallSource.objects.filter(session=session).exists():
        # One source at most: nothing to compare, and no need to read every call.
        transcript = Call.objects.filter(session=session, source_line__isnull=False).count()
        return Reconciliation(
            calls=transcript, by_source={"transcript": transcript} if transcript else {}
        )
    calls: dict[int, CallSources] = {}
    columns = ("id", "key", "session_index", "timestamp", "model", "source_line", *_COUNT_COLUMNS)
    for row in Call.objects.filter(session=session).order_by("session_index").values(*columns):
        entry = calls[row["id"]] = CallSources(
            row["id"], row["key"], row["session_index"], row["timestamp"]
        )
        if row["source_line"] is not None:
            entry.sources["transcript"] = SourceCounts(
                "transcript", row["key"], row["timestamp"],
                {c: row[c] for c in _COUNT_COLUMNS}, row["model"],
            )  # fmt: skip
    for row in CallSource.objects.filter(session=session).values(
        "call_id", "key", "timestamp", "model", "cost_usd", *_COUNT_COLUMNS
    ):
        entry = calls.get(row["call_id"])
        if entry is not None and "span" not in entry.sources:
            entry.sources["span"] = SourceCounts(
                "span", row["key"], row["timestamp"], {c: row[c] for c in _COUNT_COLUMNS},
                row["model"], row["cost_usd"],
            )  # fmt: skip
    orphans = []
    events = events.order_by("timestamp", "id").values(
        "call_id", "key", "request_id", "timestamp", "model", "cost_usd", *_COUNT_COLUMNS
    )
    for row in events:
        counts = SourceCounts(
            "event", row["request_id"] or row["key"], row["timestamp"],
            {c: row[c] for c in _COUNT_COLUMNS}, row["model"], row["cost_usd"],
        )  # fmt: skip
        entry = calls.get(row["call_id"]) if row["call_id"] else None
        if entry is None:
            orphan = CallSources(None, counts.key, None, row["timestamp"])
            orphan.sources["event"] = counts
            orphans.append(orphan)
        elif "event" not in entry.sources:
            entry.sources["event"] = counts
    return reconcile([*calls.values(), *orphans], limit=limit)


def workspace_reconciliation_days(*, workspace: Workspace, days: int = 90) -> list[dict]:
    """Totals by day (UTC) and source over the last `days` days: calls, token counts, cost
    where the source gives it, and how many of the day's calls another source disagrees
    with (a span's or an event's count that differs from the call's)."""
    from datetime import timedelta

    from django.db.models import Count, F, Q, Sum
    from django.db.models.functions import TruncDate
    from django.utils import timezone

    from traces.models import CallSource, TelemetryEvent

    since = timezone.now() - timedelta(days=days)
    sums = {c: Sum(c) for c in _COUNT_COLUMNS}
    found: dict[tuple, dict] = {}

    def collect(source, queryset, time_field, with_cost):
        extra = {"cost_usd": Sum("cost_usd")} if with_cost else {}
        rows = (
            queryset.filter(**{f"{time_field}__gte": since})
            .annotate(day=TruncDate(time_field, tzinfo=UTC))
            .values("day")
            .annotate(calls=Count("id"), **sums, **extra)
        )
        for row in rows:
            found[(row["day"], source)] = {
                "day": row["day"], "source": source, "calls": row["calls"],
                **{c: row[c] or 0 for c in _COUNT_COLUMNS},
                "cost_usd": row.get("cost_usd"), "disagreeing_calls": 0,
            }  # fmt: skip

    collect("transcript", Call.objects.filter(workspace=workspace, source_line__isnull=False),
            "timestamp", False)  # fmt: skip
    collect("span", CallSource.objects.filter(workspace=workspace), "timestamp", True)
    events = TelemetryEvent.objects.filter(workspace=workspace, name__in=RECONCILED_EVENTS).exclude(
        input_tokens=None, output_tokens=None
    )
    collect("event", events, "timestamp", True)

    def differs():
        condition = Q()
        for c in _COUNT_COLUMNS:
            condition |= Q(**{f"{c}__isnull": False}) & ~Q(**{c: F(f"call__{c}")})
        return condition

    for source, queryset in (
        ("span", CallSource.objects.filter(workspace=workspace, call__source_line__isnull=False)),
        ("event", events.filter(call__isnull=False)),
    ):
        rows = (
            queryset.filter(differs(), call__timestamp__gte=since)
            .annotate(day=TruncDate("call__timestamp", tzinfo=UTC))
            .values("day")
            .annotate(n=Count("call_id", distinct=True))
        )
        for row in rows:
            if (row["day"], source) in found:
                found[(row["day"], source)]["disagreeing_calls"] = row["n"]
    order = {"transcript": 0, "span": 1, "event": 2}
    return sorted(found.values(), key=lambda r: (r["day"], order[r["source"]]), reverse=False)
