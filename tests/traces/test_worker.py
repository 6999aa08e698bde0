"""A real Celery worker on the configured broker ingests an upload."""

import time

import pytest
from django.db.models import Count
from rest_framework.test import APIClient

from governance.services import api_token_create
from traces.models import Call

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def test_worker_ingests_an_api_upload(celery_worker, workspace, members, shared_fixtures):
    api = APIClient()
    api.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(workspace=workspace, user=members['editor']).plaintext}"
    )
    path = (
        shared_fixtures
        / "madshn__localpush__rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
    )
    with path.open("rb") as handle:
        response = api.post("/api/v1/trace-uploads/", {"files": [handle]}, format="multipart")
    assert response.status_code == 202
    assert response.json()["job"]["status"] == "queued"  # not run in the request
    url = response.json()["job_url"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = api.get(url).json()
        if job["status"] in {"succeeded", "failed"}:
            break
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    assert job["counts"]["calls"] == 81 and job["counts"]["duplicates_dropped"] == 80
    assert Call.objects.count() == 81


def _archive_of_sessions(path, *, sessions: int, calls: int) -> int:
    """A tar of `sessions` Claude transcripts of `calls` calls each; returns the calls."""
    import io
    import tarfile

    from tests.traces.factories import claude_session

    with tarfile.open(path, "w") as tar:
        for index in range(sessions):
            data = ("\n".join(claude_session(calls, session=f"sess-{index:03d}")) + "\n").encode()
            member = tarfile.TarInfo(f"projects/-work-app/sess-{index:03d}.jsonl")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return sessions * calls


def _wait_for(condition, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.postgres
def test_a_worker_killed_mid_ingest_is_requeued_and_a_fresh_worker_finishes(
    worker_process, workspace, members, tmp_path
):
    import os
    import signal

    from django.db.models import Sum

    from governance.models import Job, JobStatus
    from governance.services import jobs_requeue_stale
    from traces.models import Session
    from traces.services import ingest_job_queue, raw_upload_store

    path = tmp_path / "projects.tar"
    total = _archive_of_sessions(path, sessions=40, calls=1000)
    with path.open("rb") as handle:
        upload, _ = raw_upload_store(
            workspace=workspace, name=path.name, chunks=iter(lambda: handle.read(1 << 20), b""),
            source="api", user=members["editor"],
        )  # fmt: skip
    job = ingest_job_queue(workspace=workspace, user=members["editor"], uploads=[upload])
    first = worker_process("first", GOVERNANCE_JOB_HEARTBEAT_SECONDS="1")

    def mid_ingest():
        row = Job.objects.get(pk=job.pk)
        assert not row.is_finished, "the ingest ended before the kill: make the upload larger"
        return row.status == JobStatus.RUNNING and row.progress_done and Call.objects.exists()

    _wait_for(mid_ingest, timeout=120, what=f"the job to load calls (log: {first.log})")
    # Alive and beating: a sweep leaves it alone.
    assert jobs_requeue_stale(stale_after=10).requeued == []
    os.killpg(first.pid, signal.SIGKILL)  # the whole worker, pool included
    first.wait()

    stored_by_the_lost_attempt = Call.objects.count()
    lost = Job.objects.get(pk=job.pk)
    assert lost.status == JobStatus.RUNNING and 0 < stored_by_the_lost_attempt < total
    # The issue's state: calls stored, their sessions' totals never derived.
    assert Session.objects.filter(call_count=0).exists()
    _wait_for(
        lambda: jobs_requeue_stale(stale_after=2).requeued == [job.pk],
        timeout=30,
        what="the heartbeat to go stale",
    )
    requeued = Job.objects.get(pk=job.pk)
    assert requeued.status == JobStatus.QUEUED
    assert "worker lost: no heartbeat since" in requeued.attempt_log[0]["outcome"]

    second = worker_process("second")
    finished = _wait_for(
        lambda: (row := Job.objects.get(pk=job.pk)).is_finished and row,
        timeout=180,
        what=f"the requeued job (log: {second.log})",
    )
    assert finished.status == JobStatus.SUCCEEDED, finished.error
    assert finished.attempts == 2 and len(finished.attempt_log) == 1
    assert finished.progress_done == finished.progress_total == upload.size
    # The second attempt read every file again and added exactly what the first had not.
    assert finished.counts["files"] == 40
    assert finished.counts["calls"] == total - stored_by_the_lost_attempt
    assert Call.objects.count() == total and Session.objects.count() == 40
    for session in Session.objects.all():
        sums = Call.objects.filter(session=session).aggregate(
            calls=Count("id"), cache_read=Sum("cache_read_tokens"), output=Sum("output_tokens")
        )
        assert (session.call_count, session.cache_read_tokens, session.output_tokens) == (
            sums["calls"],
            sums["cache_read"],
            sums["output"],
        ) and session.call_count == 1000, session.external_id
