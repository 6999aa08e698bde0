"""Jobs: status transitions, progress, input errors, the polling job page, heartbeats and
the sweep of jobs whose worker was lost."""

import time
from datetime import timedelta

import pytest
from celery import shared_task
from django.core.management import call_command
from django.utils import timezone

from governance.models import Job, JobStatus
from governance.services import (
    InputError,
    job_create,
    job_enqueue,
    job_run,
    jobs_requeue_stale,
)

pytestmark = pytest.mark.django_db


def probe_work(job, reporter):
    reporter.set_total(3, unit="steps")
    for _ in range(3):
        reporter.advance()
    reporter.set_counts(done=True)
    reporter.error("line 2 is not JSON", file="a.jsonl", line=2)


@shared_task(name="tests.probe_job", time_limit=60)
def probe_job(job_id: int) -> None:
    job_run(job_id=job_id, work=probe_work)


def test_job_runs_to_success_with_progress_and_counts(workspace):
    job = job_create(workspace=workspace, kind="probe")

    def work(job, reporter):
        reporter.set_total(10, unit="lines")
        for _ in range(10):
            reporter.advance()
        reporter.count(calls=7)
        reporter.error("bad JSON", file="a.jsonl", line=3)

    job_run(job_id=job.pk, work=work)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert (job.progress_done, job.progress_total, job.progress_unit) == (10, 10, "lines")
    assert job.counts == {"calls": 7}
    assert job.errors == [{"file": "a.jsonl", "line": 3, "error": "bad JSON"}]
    assert job.error_count == 1
    assert job.started_at <= job.finished_at
    assert job.attempts == 1


def test_input_error_fails_without_raising(workspace):
    job = job_create(workspace=workspace, kind="probe")

    def work(job, reporter):
        raise InputError("the file is empty")

    job_run(job_id=job.pk, work=work)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.error == "the file is empty"


def test_unexpected_error_fails_and_reraises_for_retry(workspace):
    job = job_create(workspace=workspace, kind="probe")

    def work(job, reporter):
        raise RuntimeError("database went away")

    with pytest.raises(RuntimeError):
        job_run(job_id=job.pk, work=work)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "database went away" in job.error


def test_a_retryable_error_requeues_the_job_and_the_retry_finishes_it(workspace):
    from django.db import OperationalError

    job = job_create(workspace=workspace, kind="probe")
    attempts = []

    def work(job, reporter):
        attempts.append(job.attempts)
        reporter.error("line 3 is not JSON", file="a.jsonl", line=3)
        if len(attempts) == 1:
            raise OperationalError("server closed the connection unexpectedly")

    with pytest.raises(OperationalError):
        job_run(job_id=job.pk, work=work, retry_on=(OperationalError,))
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and not job.is_finished
    assert job.error == "attempt 1 failed, retrying: server closed the connection unexpectedly"
    assert job.error_count == 1  # what the attempt found is kept
    job_run(job_id=job.pk, work=work, retry_on=(OperationalError,))  # the Celery retry
    job.refresh_from_db()
    assert attempts == [1, 2] and job.status == JobStatus.SUCCEEDED and job.error == ""
    assert job.error_count == 1  # the retry found the same error again: reported once
    assert [entry["outcome"] for entry in job.attempt_log] == [
        "attempt 1 failed, retrying: server closed the connection unexpectedly"
    ]


def test_on_the_last_attempt_a_retryable_error_fails_the_job(workspace):
    from django.db import OperationalError

    job = job_create(workspace=workspace, kind="probe")

    def work(job, reporter):
        raise OperationalError("still down")

    with pytest.raises(OperationalError):
        job_run(job_id=job.pk, work=work)  # the task passes no retry_on on its last try
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "still down" in job.error


def test_finished_job_is_not_run_again(workspace):
    job = job_create(workspace=workspace, kind="probe")
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED)
    calls = []
    job_run(job_id=job.pk, work=lambda job, reporter: calls.append(1))
    assert calls == []


def test_job_page_polls_until_finished(client_for, workspace):
    job = job_create(workspace=workspace, kind="probe", label="slow thing", progress_total=4)
    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/jobs/{job.pk}/").content.decode()
    assert 'hx-trigger="every 1s"' in page and "slow thing" in page
    fragment = client.get(f"/w/{workspace.slug}/jobs/{job.pk}/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    assert "<html" not in fragment.content.decode()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, progress_done=4)
    done = client.get(f"/w/{workspace.slug}/jobs/{job.pk}/", HTTP_HX_REQUEST="true")
    assert done.status_code == 286  # htmx stops polling
    assert 'hx-trigger="every 1s"' not in done.content.decode()
    assert "succeeded" in done.content.decode()


def test_job_page_lists_errors_with_file_and_line(client_for, workspace):
    job = job_create(workspace=workspace, kind="probe")
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.FAILED,
        error_count=1,
        errors=[{"file": "x.jsonl", "line": 12, "error": "<b>not json</b>"}],
    )
    page = client_for("viewer").get(f"/w/{workspace.slug}/jobs/{job.pk}/").content.decode()
    assert "x.jsonl" in page and ">12<" in page
    assert "&lt;b&gt;not json&lt;/b&gt;" in page


# --- heartbeats and lost workers ----------------------------------------------------


def queued_job(workspace) -> Job:
    """A job queued for `tests.probe_job` (the test transaction never commits, so the task
    is not sent)."""
    job = job_create(workspace=workspace, kind="probe", label="probe")
    job_enqueue(job=job, task=probe_job)
    return job


def lose_worker(job: Job, *, attempts: int = 1, seconds_ago: float = 600, heartbeat=True):
    """The state a worker killed mid-job leaves: running, with its last heartbeat long ago."""
    then = timezone.now() - timedelta(seconds=seconds_ago)
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        attempts=attempts,
        started_at=then,
        heartbeat_at=then if heartbeat else None,
        progress_total=3,
        progress_done=2,
        counts={"done": False},
        errors=[{"file": "a.jsonl", "line": 2, "error": "line 2 is not JSON"}],
        error_count=1,
    )
    return then


def test_a_job_whose_worker_was_lost_is_requeued_and_runs_again(workspace, run_on_commit):
    job = queued_job(workspace)
    assert job.task_name == "tests.probe_job"
    lost_at = lose_worker(job)
    with run_on_commit():  # the task is sent on commit; here it runs in-process
        swept = jobs_requeue_stale()
    assert (swept.requeued, swept.failed) == ([job.pk], [])
    job.refresh_from_db()
    assert (job.status, job.attempts, job.error) == (JobStatus.SUCCEEDED, 2, "")
    # The second attempt's report alone: not added to what the lost one had reported.
    assert (job.progress_done, job.counts, job.error_count) == (3, {"done": True}, 1)
    assert [(entry["attempt"], entry["outcome"]) for entry in job.attempt_log] == [
        (1, f"attempt 1: worker lost: no heartbeat since {lost_at:%Y-%m-%d %H:%M:%S} UTC; requeued")
    ]


def test_a_job_still_beating_is_left_alone(workspace):
    job = queued_job(workspace)
    lose_worker(job, seconds_ago=5)
    assert jobs_requeue_stale() == jobs_requeue_stale(stale_after=60)
    assert jobs_requeue_stale().requeued == []
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and job.attempt_log == []


def test_a_job_lost_on_its_last_attempt_fails_with_the_reason(workspace, settings):
    settings.GOVERNANCE_JOB_MAX_ATTEMPTS = 3
    job = queued_job(workspace)
    lost_at = lose_worker(job, attempts=3)
    assert jobs_requeue_stale().failed == [job.pk]
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.finished_at is not None
    assert job.error == (
        f"worker lost: no heartbeat since {lost_at:%Y-%m-%d %H:%M:%S} UTC; gave up after 3 attempts"
    )
    assert job.attempt_log[-1]["outcome"] == job.error


def test_a_lost_job_that_no_task_runs_fails(workspace):
    job = job_create(workspace=workspace, kind="probe")  # run in a request, not queued
    started = lose_worker(job, heartbeat=False)  # from before heartbeats: its start counts
    assert jobs_requeue_stale().failed == [job.pk]
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error == (
        f"worker lost: no heartbeat since {started:%Y-%m-%d %H:%M:%S} UTC; it was not run by "
        "a queued task, so nothing can run it again"
    )


def test_without_a_broker_the_server_start_resumes_every_running_job(
    workspace, run_on_commit, capsys
):
    job = queued_job(workspace)
    lose_worker(job, seconds_ago=1)  # the server was killed a second ago
    call_command("requeue_stale_jobs")
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING  # not stale yet by the usual threshold
    with run_on_commit():
        call_command("requeue_stale_jobs", "--server-start")
    assert f"Requeued 1 job(s) (#{job.pk}), failed 0." in capsys.readouterr().out
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.SUCCEEDED, 2)


def test_job_page_and_api_show_a_requeued_job(workspace, client_for, api_for):
    job = queued_job(workspace)
    lost_at = lose_worker(job)
    page = client_for("viewer").get(f"/w/{workspace.slug}/jobs/{job.pk}/").content.decode()
    assert f"no heartbeat since {lost_at:%Y-%m-%d %H:%M:%S}: its worker may be lost" in page
    jobs_requeue_stale()
    page = client_for("viewer").get(f"/w/{workspace.slug}/jobs/{job.pk}/").content.decode()
    outcome = (
        f"attempt 1: worker lost: no heartbeat since {lost_at:%Y-%m-%d %H:%M:%S} UTC; requeued"
    )
    assert f"requeued: {outcome}" in page  # beside the status badge
    assert "Earlier attempts" in page and f"<td>{outcome}</td>" in page
    assert "Why it failed" not in page  # it did not fail: it waits for a worker
    data = api_for("viewer").get(f"/api/v1/jobs/{job.pk}/").json()
    assert (data["status"], data["attempts"]) == ("queued", 1)
    assert [entry["outcome"] for entry in data["attempt_log"]] == [outcome]
    assert data["heartbeat_at"] is not None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_job_beats_while_its_work_reports_nothing(workspace, settings):
    settings.GOVERNANCE_JOB_HEARTBEAT_SECONDS = 1
    job = job_create(workspace=workspace, kind="probe")
    beats = []

    def quiet_work(job, reporter):  # a long step without progress, like deriving sessions
        first = Job.objects.get(pk=job.pk).heartbeat_at
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(beats) < 2:
            beat = Job.objects.get(pk=job.pk).heartbeat_at
            if beat > (beats[-1] if beats else first):
                beats.append(beat)
            time.sleep(0.1)

    job_run(job_id=job.pk, work=quiet_work)
    assert len(beats) == 2 and beats[0] < beats[1]
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
