"""An ingest job reaches the files it read and the sessions they hold: for a first upload,
a re-upload of the same bytes and a grown file; the sessions list filters and sorts by it."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from governance.models import Job, JobStatus
from tests.traces.factories import claude_session
from traces.models import JobFile, Session, UploadSource
from traces.selectors import sessions_of_job
from traces.services import trace_uploads_receive

pytestmark = pytest.mark.django_db


def _transcript(session: str, calls: int) -> bytes:
    return ("\n".join(claude_session(calls, session=session)) + "\n").encode()


@pytest.fixture
def upload(workspace, members, run_on_commit):
    """Upload files through the web's service; returns the finished job."""

    def send(*files: tuple[str, bytes]) -> Job:
        with run_on_commit():
            job = trace_uploads_receive(
                workspace=workspace,
                user=members["editor"],
                files=[SimpleUploadedFile(name, data) for name, data in files],
                source=UploadSource.WEB,
            )
        job.refresh_from_db()
        return job

    return send


def test_a_job_links_the_files_it_read_and_their_sessions(upload, workspace):
    job = upload(("a.jsonl", _transcript("sess-a", 3)), ("b.jsonl", _transcript("sess-b", 2)))
    assert job.status == JobStatus.SUCCEEDED
    links = JobFile.objects.filter(job=job).select_related("file")
    assert sorted((link.file.member, link.read) for link in links) == [
        ("a.jsonl", True),
        ("b.jsonl", True),
    ]
    assert sorted(sessions_of_job(job_id=job.pk).values_list("external_id", flat=True)) == [
        "sess-a",
        "sess-b",
    ]
    a = Session.objects.get(external_id="sess-a")
    assert a.last_ingested_at is not None and a.last_ingested_at >= a.created_at


def test_a_reupload_of_the_same_bytes_reaches_the_same_sessions(upload):
    first = upload(("a.jsonl", _transcript("sess-a", 3)))
    again = upload(("copy-of-a.jsonl", _transcript("sess-a", 3)))
    assert again.counts["files_already_ingested"] == 1
    link = JobFile.objects.get(job=again)
    assert link.read is False
    assert link.file == JobFile.objects.get(job=first).file
    assert list(sessions_of_job(job_id=again.pk).values_list("external_id", flat=True)) == [
        "sess-a"
    ]


def test_a_grown_file_links_its_job_to_the_session_and_stamps_it_again(upload):
    first = upload(("a.jsonl", _transcript("sess-a", 3)))
    stamped = Session.objects.get(external_id="sess-a").last_ingested_at
    grown = upload(("a.jsonl", _transcript("sess-a", 5)))
    link = JobFile.objects.select_related("file").get(job=grown)
    assert link.read is True and link.file.grown_from_id == JobFile.objects.get(job=first).file_id
    assert list(sessions_of_job(job_id=grown.pk).values_list("external_id", flat=True)) == [
        "sess-a"
    ]
    session = Session.objects.get(external_id="sess-a")
    assert session.call_count == 5
    assert session.last_ingested_at > stamped


def test_sessions_list_filters_by_job_and_sorts_by_ingestion(upload, client_for, workspace):
    # The later upload holds the session that started earlier: by start it sorts last.
    early = upload(("new.jsonl", _transcript("sess-new", 2)))
    late = upload(("old.jsonl", _transcript("sess-old", 2)))
    Session.objects.filter(external_id="sess-old").update(started_at="2020-01-01T00:00:00Z")
    client = client_for("viewer")
    base = f"/w/{workspace.slug}/traces/"
    by_start = client.get(base).content.decode()
    assert by_start.index("sess-new") < by_start.index("sess-old")
    by_ingest = client.get(base + "?sort=-ingested").content.decode()
    assert by_ingest.index("sess-old") < by_ingest.index("sess-new")
    only_late = client.get(base + f"?job={late.pk}&sort=-ingested").content.decode()
    assert "sess-old" in only_late and "sess-new" not in only_late
    assert re.search(
        rf'Sessions from upload <a href="[^"]+/jobs/{late.pk}/">job #{late.pk}</a>', only_late
    )
    only_early = client.get(base + f"?job={early.pk}").content.decode()
    assert "sess-new" in only_early and "sess-old" not in only_early


def test_the_api_filters_sessions_by_job(upload, api_for):
    job = upload(("a.jsonl", _transcript("sess-a", 2)))
    upload(("b.jsonl", _transcript("sess-b", 2)))
    body = api_for("viewer").get(f"/api/v1/sessions/?job={job.pk}").json()
    assert [row["external_id"] for row in body["results"]] == ["sess-a"]


def test_job_page_links_to_its_sessions_and_names_its_files(upload, client_for, workspace):
    job = upload(("a.jsonl", _transcript("sess-a", 3)))
    again = upload(("a-again.jsonl", _transcript("sess-a", 3)))
    page = client_for("viewer").get(f"/w/{workspace.slug}/jobs/{job.pk}/").content.decode()
    assert f"/w/{workspace.slug}/traces/?job={job.pk}&amp;sort=-ingested" in page
    assert "1 session from this upload" in page
    assert "a.jsonl" in page
    session = Session.objects.get(external_id="sess-a")
    assert f'href="/w/{workspace.slug}/traces/sessions/{session.pk}/"' in page
    page = client_for("viewer").get(f"/w/{workspace.slug}/jobs/{again.pk}/").content.decode()
    assert "already ingested, skipped" in page
    assert "1 session from this upload" in page


def test_session_page_names_the_uploads_it_came_from(upload, client_for, workspace):
    first = upload(("a.jsonl", _transcript("sess-a", 3)))
    again = upload(("a-again.jsonl", _transcript("sess-a", 3)))
    session = Session.objects.get(external_id="sess-a")
    page = client_for("viewer").get(f"/w/{workspace.slug}/traces/sessions/{session.pk}/")
    html = page.content.decode()
    assert (
        f'<a href="/w/{workspace.slug}/jobs/{again.pk}/">job #{again.pk}</a> <span class="mono">a.jsonl</span> (again)'
        in html
    )
    assert (
        f'<a href="/w/{workspace.slug}/jobs/{first.pk}/">job #{first.pk}</a> <span class="mono">a.jsonl</span><'
        in html
    )


def test_sessions_list_filters_by_ingestion_date(upload, client_for, workspace):
    upload(("a.jsonl", _transcript("sess-a", 2)))
    Session.objects.filter(external_id="sess-a").update(last_ingested_at="2026-05-02T10:00:00Z")
    upload(("b.jsonl", _transcript("sess-b", 2)))
    Session.objects.filter(external_id="sess-b").update(last_ingested_at="2026-05-04T10:00:00Z")
    client = client_for("viewer")
    html = client.get(f"/w/{workspace.slug}/traces/?ingested_after=2026-05-03").content.decode()
    assert "sess-b" in html and "sess-a" not in html
    html = client.get(f"/w/{workspace.slug}/traces/?ingested_after=2026-05-02").content.decode()
    assert "sess-b" in html and "sess-a" in html


def test_files_an_earlier_attempt_read_count_as_read_by_the_retry(upload):
    from governance.services import job_run
    from traces.services.ingestion import trace_ingest_job_run

    job = upload(("a.jsonl", _transcript("sess-a", 3)))
    # As if the first attempt died after committing its calls, before linking its files.
    JobFile.objects.filter(job=job).delete()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.QUEUED, finished_at=None)
    job_run(job_id=job.pk, work=trace_ingest_job_run)
    job.refresh_from_db()
    assert job.counts["files_already_ingested"] == 1
    assert list(JobFile.objects.filter(job=job).values_list("file__member", "read")) == [
        ("a.jsonl", True)
    ]
    assert list(sessions_of_job(job_id=job.pk).values_list("external_id", flat=True)) == ["sess-a"]
