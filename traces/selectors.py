"""Reads for traces, always scoped to a workspace."""

from __future__ import annotations

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
