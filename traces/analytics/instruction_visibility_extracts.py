"""Text extracts written after ingest, for instruction visibility (seed 000).

Once the derive step has stored sessions, a job (queued when that transaction commits)
extracts the stored texts of the workspace's calls that have no extract yet, or a stale one
(`CallTextExtract`), so that later counts find them stored. A request never writes them:
`instruction_visibility_for` extracts missing ones in memory, and only the counting job
stores what it extracts. Ingest itself only registers the commit callback; the callback
queues one job per workspace unless one is already waiting."""

from __future__ import annotations

from django.db import transaction

JOB_KIND = "instruction_visibility_extract"
TASK = "analytics.instruction_visibility_extract"


class _QueueAfterCommit:
    """The commit callback: queue this workspace's extract job."""

    def __init__(self, workspace_id: int):
        self.workspace_id = workspace_id

    def __call__(self) -> None:
        extracts_queue(workspace_id=self.workspace_id)


def extracts_after_derive(*, workspace_id: int) -> None:
    """The derive step's call for each session it stores: once the transaction commits,
    queue this workspace's extract job (registered once per transaction)."""
    connection = transaction.get_connection()
    if connection.in_atomic_block and any(
        isinstance(entry[1], _QueueAfterCommit) and entry[1].workspace_id == workspace_id
        for entry in connection.run_on_commit
    ):
        return
    transaction.on_commit(_QueueAfterCommit(workspace_id))


def extracts_queue(*, workspace_id: int):
    """Queue the extract job of this workspace, unless one is queued and not yet started
    (it will find these calls too); the job, or None."""
    from governance.models import Job, JobStatus, Workspace
    from governance.services import job_create, job_enqueue

    waiting = Job.objects.filter(
        workspace_id=workspace_id, kind=JOB_KIND, status=JobStatus.QUEUED
    ).exists()
    workspace = Workspace.objects.filter(pk=workspace_id).first()
    if waiting or workspace is None:
        return None
    with transaction.atomic():
        job = job_create(
            workspace=workspace,
            kind=JOB_KIND,
            label="Text extracts for instruction visibility",
            progress_unit="calls",
        )
        job_enqueue(job=job, task=TASK)
    return job


def extracts_job_run(job, reporter) -> None:
    """The job's work: extract and store every missing or stale extract of the workspace."""
    from traces.analytics.instruction_visibility_matching import extract_missing, stale_call_ids

    ids = stale_call_ids(job.workspace_id)
    reporter.set_total(len(ids), "calls")
    done = 0

    def advance(k: int) -> None:
        nonlocal done
        done += k
        reporter.set_done(done)

    written = extract_missing(ids, advance)
    reporter.set_counts(calls=len(ids), extracted=written)
