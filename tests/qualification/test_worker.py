"""A real Celery worker loads an uploaded file and analyses it (PostgreSQL and Redis in CI)."""

import time

import pytest

from governance.models import Job
from qualification import selectors, services
from qualification.models import Qualification, Trial
from tests.qualification.conftest import to_csv

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def wait_for(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_worker_loads_trials_then_analyses(
    celery_worker, make_qualification, planted_rows, members
):
    qualification = make_qualification()
    upload = services.trial_batch_submit(
        qualification=qualification,
        content=to_csv(planted_rows),
        filename="sweep.csv",
        actor=members["editor"],
    )
    assert wait_for(lambda: Job.objects.get(pk=upload.job_id).is_finished)
    job = Job.objects.get(pk=upload.job_id)
    assert job.status == "succeeded" and job.progress_done == job.progress_total == 2000
    assert Trial.objects.filter(qualification=qualification).count() == 2000
    assert wait_for(
        lambda: Job.objects.filter(kind="qualification_analysis", status="succeeded").exists()
    )
    fresh = Qualification.objects.get(pk=qualification.pk)
    analysis = selectors.analysis_current(qualification=fresh)
    assert analysis.result["proposed_limit_tokens"] == 16000
    analysis_job = Job.objects.get(kind="qualification_analysis")
    assert analysis_job.counts["trials"] == 2000 and analysis_job.progress_done == 3


def test_worker_rejects_a_bad_file_without_retrying(
    celery_worker, make_qualification, planted_rows, members
):
    qualification = make_qualification()
    rows = [dict(r) for r in planted_rows]
    rows[5]["output_tokens"] = "-2"
    upload = services.trial_batch_submit(
        qualification=qualification,
        content=to_csv(rows),
        filename="bad.csv",
        actor=members["editor"],
    )
    assert wait_for(lambda: Job.objects.get(pk=upload.job_id).is_finished)
    job = Job.objects.get(pk=upload.job_id)
    assert job.status == "failed" and job.attempts == 1
    assert job.errors == [
        {
            "file": "bad.csv",
            "line": 7,
            "error": "output_tokens: output_tokens must not be negative, got -2",
        }
    ]
    assert Trial.objects.count() == 0
