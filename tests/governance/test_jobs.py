"""Jobs: status transitions, progress, input errors, and the polling job page."""

import pytest

from governance.models import Job, JobStatus
from governance.services import InputError, job_create, job_run

pytestmark = pytest.mark.django_db


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
