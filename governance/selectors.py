"""Reads for the core: memberships, workspaces a user can see, jobs and the audit log."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import Http404

from governance.models import ApiToken, AuditEvent, Job, Membership, Workspace


def memberships_for_user(*, user) -> QuerySet[Membership]:
    if not getattr(user, "is_authenticated", False):
        return Membership.objects.none()
    return Membership.objects.filter(user=user).select_related("workspace")


def membership_get(*, user, workspace_slug: str) -> Membership:
    """The user's membership in a workspace; 404 if the workspace is unknown or not theirs."""
    membership = memberships_for_user(user=user).filter(workspace__slug=workspace_slug).first()
    if membership is None:
        raise Http404("No such workspace, or you are not a member of it.")
    return membership


def workspace_members(*, workspace: Workspace) -> QuerySet[Membership]:
    return Membership.objects.filter(workspace=workspace).select_related("user")


def api_tokens_for(*, workspace: Workspace, user=None) -> QuerySet[ApiToken]:
    tokens = ApiToken.objects.filter(workspace=workspace).select_related("user")
    return tokens.filter(user=user) if user is not None else tokens


def jobs_for(*, workspace: Workspace, kind: str | None = None) -> QuerySet[Job]:
    jobs = Job.objects.filter(workspace=workspace).select_related("created_by")
    return jobs.filter(kind=kind) if kind else jobs


# Kinds whose jobs are re-run for the same target (a refresh): a run of them shows as one row.
REPEATING_JOB_KINDS = {"trace_analytics", "qualification_analysis"}


@dataclass
class JobRow:
    """A job on the jobs list, standing for `count` consecutive runs of the same refresh."""

    job: Job
    count: int = 1


def jobs_collapsed(jobs) -> list[JobRow]:
    """Consecutive jobs of a repeating kind with the same target (its label) as one row,
    led by the first of them (the latest, in the list's newest-first order)."""
    rows: list[JobRow] = []
    for job in jobs:
        last = rows[-1].job if rows else None
        if (
            last is not None
            and job.kind in REPEATING_JOB_KINDS
            and (job.kind, job.label) == (last.kind, last.label)
        ):
            rows[-1].count += 1
        else:
            rows.append(JobRow(job))
    return rows


def job_get(*, workspace: Workspace, pk: int) -> Job:
    job = jobs_for(workspace=workspace).filter(pk=pk).first()
    if job is None:
        raise Http404("No such job in this workspace.")
    return job


def audit_events_for(*, workspace: Workspace) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(workspace=workspace).select_related("actor")
