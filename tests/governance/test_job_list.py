"""The jobs list and job page: labels instead of codes, honest statuses, durations,
filters by kind and status, and repeated refreshes shown as one row."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from governance import labels
from governance.models import AuditEvent, Job, JobStatus

pytestmark = pytest.mark.django_db


def _job(workspace, kind="trace_ingest", label="Ingest a.jsonl", status=JobStatus.SUCCEEDED,
         ago=0, took=None, **fields) -> Job:  # fmt: skip
    job = Job.objects.create(workspace=workspace, kind=kind, label=label, status=status, **fields)
    created = timezone.now() - timedelta(minutes=ago)
    started = created + timedelta(seconds=1) if status != JobStatus.QUEUED else None
    if took is None and status in JobStatus.finished():
        took = timedelta(seconds=3)
    finished = started + took if started and took is not None else None
    Job.objects.filter(pk=job.pk).update(
        created_at=created, started_at=started, finished_at=finished
    )
    job.refresh_from_db()
    return job


def _rows(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [row for row in body.split("<tr>")[1:]]


def test_labels_have_one_mapping_per_vocabulary_and_a_readable_fallback():
    assert labels.job_count_label("tokens_cache_creation") == "Cache-write tokens"
    assert labels.audit_action_label("artifact.delete") == "Artifact deleted"
    assert labels.audit_action_label("spec_version.approve") == "Spec version approved"
    assert labels.job_kind_label("trace_analytics") == "Trace analytics refresh"
    assert labels.job_count_label("brand_new_count") == "Brand new count"
    assert labels.audit_action_label("brand_new.thing") == "Brand new thing"


def test_job_page_shows_count_labels_kind_label_and_duration(workspace, client_for):
    job = _job(
        workspace, took=timedelta(seconds=75),
        counts={"tokens_cache_creation": 1200, "files_already_ingested": 0},
    )  # fmt: skip
    page = client_for("viewer").get(f"/w/{workspace.slug}/jobs/{job.pk}/").content.decode()
    assert "Cache-write tokens" in page
    assert "Files already ingested (skipped)" in page
    assert ">tokens_cache_creation<" not in page
    assert "<dd>Trace upload</dd>" in page
    assert "<dt>Took</dt><dd>1 min 15 s</dd>" in page


def test_a_job_with_no_data_says_so_on_the_list_and_the_page(workspace, client_for):
    reason = "No data: no file of this upload held calls that could be read; the reasons are listed below."
    job = _job(workspace, status=JobStatus.FAILED, took=timedelta(seconds=2), error=reason)
    broken = _job(workspace, status=JobStatus.FAILED, took=timedelta(seconds=2),
                  error="OperationalError: the disk is full", label="Ingest b.jsonl")  # fmt: skip
    client = client_for("viewer")
    listing = client.get(f"/w/{workspace.slug}/jobs/").content.decode()
    no_data_row = next(row for row in _rows(listing) if f"/jobs/{job.pk}/" in row)
    assert '<span class="badge status-failed">no data</span>' in no_data_row
    assert "No data: no file of this upload held calls" in no_data_row
    failed_row = next(row for row in _rows(listing) if f"/jobs/{broken.pk}/" in row)
    assert '<span class="badge status-failed">failed</span>' in failed_row
    assert "the disk is full" in failed_row
    page = client.get(f"/w/{workspace.slug}/jobs/{job.pk}/").content.decode()
    assert '<span class="badge status-failed">no data</span>' in page
    assert "Why there is no data" in page and reason in page
    assert "No session came from this upload." in page


def test_jobs_list_shows_durations(workspace, client_for):
    _job(workspace, label="Ingest done.jsonl", took=timedelta(seconds=4.25), ago=3)
    _job(workspace, label="Ingest slow.jsonl", status=JobStatus.RUNNING, ago=2)
    _job(workspace, label="Ingest later.jsonl", status=JobStatus.QUEUED, ago=1)
    rows = _rows(client_for("viewer").get(f"/w/{workspace.slug}/jobs/").content.decode())
    later, slow, done = rows
    assert "Ingest later.jsonl" in later and '<td class="num nowrap">–</td>' in later
    assert "Ingest slow.jsonl" in slow
    assert re.search(r'<td class="num nowrap">running for [1-9]\d* min \d+ s</td>', slow)
    assert "Ingest done.jsonl" in done and '<td class="num nowrap">4.2 s</td>' in done


def test_jobs_list_filters_by_kind_and_status(workspace, client_for):
    _job(workspace, kind="trace_ingest", label="Ingest ok.jsonl")
    _job(workspace, kind="trace_ingest", label="Ingest bad.jsonl", status=JobStatus.FAILED)
    _job(workspace, kind="trial_upload", label="Trials t.csv", status=JobStatus.FAILED)
    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/jobs/").content.decode()
    assert '<option value="" selected>Any kind</option>' in page
    assert '<option value="" selected>Any status</option>' in page
    assert '<option value="trace_ingest">Trace upload</option>' in page
    failed = client.get(f"/w/{workspace.slug}/jobs/?status=failed").content.decode()
    assert "Ingest bad.jsonl" in failed and "Trials t.csv" in failed
    assert "Ingest ok.jsonl" not in failed
    both = client.get(f"/w/{workspace.slug}/jobs/?status=failed&kind=trial_upload").content.decode()
    assert len(_rows(both)) == 1 and "Trials t.csv" in both
    none = client.get(f"/w/{workspace.slug}/jobs/?status=running").content.decode()
    assert "No job matches these filters" in none


def test_repeated_refreshes_collapse_into_one_row_with_the_latest_status(workspace, client_for):
    target = "Trace analytics: all sessions"
    for minutes in (9, 8, 7):
        _job(workspace, kind="trace_analytics", label=target, ago=minutes)
    _job(workspace, kind="trace_analytics", label=target, status=JobStatus.FAILED, ago=6)
    _job(workspace, label="Ingest a.jsonl", ago=5)  # breaks the run
    _job(workspace, kind="trace_analytics", label=target, ago=4)
    _job(workspace, label="Ingest a.jsonl", ago=3)  # uploads are never collapsed
    _job(workspace, label="Ingest a.jsonl", ago=2)
    client = client_for("viewer")
    rows = _rows(client.get(f"/w/{workspace.slug}/jobs/").content.decode())
    assert len(rows) == 5
    run = rows[4]
    assert "× 4" in run and '<span class="badge status-failed">failed</span>' in run
    assert all("× " not in row for row in rows[:4])
    assert 'href="?kind=trace_analytics&amp;q=Trace+analytics%3A+all+sessions"' in run
    every = client.get(f"/w/{workspace.slug}/jobs/?kind=trace_analytics&q={target}")
    assert len(_rows(every.content.decode())) == 5


def test_audit_log_shows_action_labels(workspace, client_for, members):
    AuditEvent.objects.create(
        workspace=workspace, actor=members["admin"], action="artifact.delete",
        object_type="artifact", object_id="7", object_repr="pytest -q",
    )  # fmt: skip
    page = client_for("viewer").get(f"/w/{workspace.slug}/settings/audit/").content.decode()
    assert '<td title="artifact.delete">Artifact deleted</td>' in page
    assert "<code>artifact.delete</code>" not in page


def test_audit_log_filters_by_what_the_event_is_about(workspace, client_for, members):
    for action in ("artifact.delete", "artifact_policy.update", "spec_version.approve"):
        AuditEvent.objects.create(workspace=workspace, actor=members["admin"], action=action)
    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/settings/audit/").content.decode()
    assert '<option value="" selected>Anything</option>' in page
    assert '<option value="artifact_policy">Artifact policy</option>' in page
    about = client.get(f"/w/{workspace.slug}/settings/audit/?action=artifact").content.decode()
    shown = [row.split(">", 1)[1].split("<", 1)[0] for row in about.split('<td title="')[1:]]
    assert shown == ["Artifact deleted"]


def test_durations_read_at_every_scale():
    from governance.templatetags.governance import duration

    shown = [duration(timedelta(seconds=s)) for s in (0.04, 4.25, 45, 185, 7800)]
    assert shown == ["under 0.1 s", "4.2 s", "45 s", "3 min 5 s", "2 h 10 min"]
    assert duration(None) == "–"
