"""The jobs list, a job page and the audit log in Chromium: labels, durations, filters and
collapsed refreshes, as a reviewer sees them."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from governance.models import AuditEvent, Job, JobStatus
from tests.screenshots import shoot_widths

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TARGET = "Trace analytics: all sessions"


def _job(workspace, *, kind, label, status=JobStatus.SUCCEEDED, ago, took=5, **fields) -> Job:
    job = Job.objects.create(workspace=workspace, kind=kind, label=label, status=status, **fields)
    created = timezone.now() - timedelta(minutes=ago)
    started = created + timedelta(seconds=1)
    finished = started + timedelta(seconds=took) if status in JobStatus.finished() else None
    Job.objects.filter(pk=job.pk).update(
        created_at=created, started_at=started, finished_at=finished
    )
    return job


@pytest.fixture
def jobs(workspace):
    for minutes in (30, 29, 28):
        _job(workspace, kind="trace_analytics", label=TARGET, ago=minutes)
    _job(workspace, kind="trace_analytics", label=TARGET, ago=27, took=12,
         status=JobStatus.FAILED, error="ValueError: no calls in the window")  # fmt: skip
    _job(workspace, kind="trial_upload", label="Trials sweep.csv", ago=20, took=125)
    _job(workspace, kind="trace_ingest", label="Ingest empty.jsonl", ago=10, took=1,
         status=JobStatus.FAILED,
         error="No data: this upload holds no model calls.")  # fmt: skip
    return _job(
        workspace, kind="trace_ingest", label="Ingest big.zip", ago=2,
        status=JobStatus.RUNNING, counts={"tokens_cache_creation": 1200, "calls": 40},
    )  # fmt: skip


def _cells(row) -> list[str]:
    return [cell.strip() for cell in row.locator("td").all_inner_texts()]


def test_jobs_list_durations_labels_and_collapsed_refreshes(page, login, members, workspace, jobs):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/jobs/")
    rows = page.locator("#results tbody tr")
    assert rows.count() == 4
    running, no_data, trials, refreshes = (_cells(rows.nth(i)) for i in range(4))
    assert running[0] == "Trace upload" and running[2] == "running"
    assert re.fullmatch(r"running for [1-9]\d* min \d+ s", running[5])  # started 2 min ago
    assert no_data[2].startswith("no data\nNo data: this upload holds no model calls.")
    assert no_data[5] == "1.0 s"
    assert trials[0] == "Trial upload" and trials[5] == "2 min 5 s"
    assert refreshes[0] == "Trace analytics refresh"
    assert refreshes[1] == f"{TARGET} × 4 all runs"
    assert refreshes[2].startswith("failed")  # the latest of the four
    assert page.get_by_text("Consecutive runs of the same refresh show as one row").is_visible()
    shoot_widths(page, "jobs-list")

    rows.nth(3).get_by_role("link", name="all runs").click()
    page.wait_for_load_state("networkidle")
    assert page.get_by_label("Kind").input_value() == "trace_analytics"
    assert rows.count() == 4
    assert [_cells(rows.nth(i))[2].split("\n")[0] for i in range(4)] == [
        "failed", "succeeded", "succeeded", "succeeded",
    ]  # fmt: skip


def test_jobs_list_filters_by_kind_and_status(page, login, members, workspace, jobs):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/jobs/")
    kind, status = page.get_by_label("Kind"), page.get_by_label("Status", exact=True)
    assert kind.locator("option:checked").inner_text() == "Any kind"
    assert status.locator("option:checked").inner_text() == "Any status"
    rows = page.locator("#results tbody tr")
    status.select_option("failed")
    page.wait_for_url(re.compile(r"status=failed"))
    page.wait_for_load_state("networkidle")
    assert sorted(_cells(rows.nth(i))[1] for i in range(rows.count())) == [
        "Ingest empty.jsonl",
        TARGET,
    ]
    kind.select_option(label="Trace upload")
    page.wait_for_url(re.compile(r"kind=trace_ingest"))
    page.wait_for_load_state("networkidle")
    assert rows.count() == 1 and _cells(rows.first)[1] == "Ingest empty.jsonl"
    status.select_option("queued")
    page.get_by_text("No job matches these filters").wait_for()


def test_job_page_and_audit_log_show_labels(page, login, members, workspace, jobs):
    AuditEvent.objects.create(
        workspace=workspace, actor=members["admin"], action="artifact.delete",
        object_type="artifact", object_id="7", object_repr="pytest -q",
    )  # fmt: skip
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/jobs/{jobs.pk}/")
    assert page.get_by_role("row", name="Cache-write tokens 1,200").is_visible()
    assert page.get_by_text("tokens_cache_creation").count() == 0
    assert page.get_by_text("Running for", exact=True).is_visible()
    page.goto(f"{page.base_url}/w/{workspace.slug}/settings/audit/")
    row = page.locator("#results tbody tr").first
    assert _cells(row)[2] == "Artifact deleted"
    assert page.get_by_text("artifact.delete", exact=True).count() == 0
    page.get_by_label("About").select_option(label="Spec version")
    page.get_by_text("No event about this").wait_for()
    page.get_by_label("About").select_option(label="Artifact")
    page.locator("#results tbody tr").first.wait_for()
    assert _cells(page.locator("#results tbody tr").first)[2] == "Artifact deleted"
