"""The cached analytics result for a filter, and the job that computes it."""

from __future__ import annotations

from governance.models import Job, JobStatus, Workspace
from traces.analytics.models import AnalyticsResult
from traces.analytics.selectors.filters import JOB_KIND, AnalyticsFilters


def result_for(*, workspace: Workspace, filters: AnalyticsFilters) -> AnalyticsResult | None:
    return AnalyticsResult.objects.filter(workspace=workspace, filter_key=filters.key).first()


def latest_job(*, workspace: Workspace, filters: AnalyticsFilters) -> Job | None:
    """The most recent analytics job for these filters, whatever its status."""
    return (
        Job.objects.filter(workspace=workspace, kind=JOB_KIND, params__key=filters.key)
        .order_by("-created_at", "-id")
        .first()
    )


def failed_on(job: Job | None, data_version: int) -> bool:
    """Whether `job` failed computing `data_version` (the version it read when it started,
    else the one current when it was queued)."""
    if job is None or job.status != JobStatus.FAILED:
        return False
    version = (job.counts or {}).get("data_version", (job.params or {}).get("data_version"))
    return version == data_version


def failure_reason(job: Job) -> str:
    """The first line of a failed job's error (the rest is its traceback)."""
    return (job.error or "").strip().split("\n", 1)[0] or "no reason was recorded"
