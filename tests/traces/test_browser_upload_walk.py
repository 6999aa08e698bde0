"""Done-when walk in Chromium: upload a transcript and reach its sessions; an upload with
nothing readable says "no data" and why."""

import re
from datetime import UTC, datetime

import pytest

from tests.screenshots import shoot_widths
from tests.traces.factories import claude_session
from traces.models import Session
from traces.services import ingest_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _transcript(session: str, calls: int) -> bytes:
    return ("\n".join(claude_session(calls, session=session)) + "\n").encode()


def test_upload_a_transcript_and_reach_its_sessions(page, login, members, workspace, tmp_path):
    # Sessions already here started after the one about to be uploaded: by start date the
    # upload would sort last.
    for name in ("sess-here-1", "sess-here-2"):
        ingest_bytes(
            workspace=workspace, name=f"{name}.jsonl", data=_transcript(name, 2),
            source="demo", refresh_analytics=False,
        )  # fmt: skip
    Session.objects.filter(workspace=workspace).update(started_at=datetime(2026, 6, 1, tzinfo=UTC))
    transcript = tmp_path / "fix-the-test.jsonl"
    transcript.write_bytes(_transcript("sess-uploaded", 3))

    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/upload/")
    page.set_input_files("input[type=file]", [str(transcript)])
    page.get_by_role("button", name="Upload and ingest").click()
    page.wait_for_load_state("networkidle")
    flash = page.get_by_text(re.compile(r"Upload stored and ingested by job #(\d+): 3 calls"))
    assert flash.is_visible()
    job_id = re.search(r"job #(\d+)", flash.inner_text()).group(1)
    row = page.locator("table tbody tr").first
    assert row.locator(".badge").inner_text() == "succeeded"

    row.get_by_role("link", name=re.compile(rf"#{job_id} Ingest fix-the-test.jsonl")).click()
    page.wait_for_load_state("networkidle")
    assert page.locator("#job-panel .badge").first.inner_text() == "succeeded"
    assert page.get_by_role("heading", name="What it loaded").is_visible()
    files = page.locator("table.job-files tbody tr")
    assert files.count() == 1
    assert files.first.locator("td").nth(0).inner_text() == "fix-the-test.jsonl"
    assert files.first.locator("td").nth(1).inner_text() == "read"
    assert files.first.get_by_role("link", name="sess-uploaded").is_visible()
    assert page.get_by_role("row", name=re.compile("Cache-write tokens")).is_visible()
    assert page.get_by_text("Took", exact=True).is_visible()
    shoot_widths(page, "job-page")

    page.get_by_role("link", name="1 session from this upload →").click()
    page.wait_for_load_state("networkidle")
    assert f"job={job_id}" in page.url
    assert page.get_by_text(
        f"Sessions from upload job #{job_id}, last ingested first."
    ).is_visible()
    rows = page.locator("#results table tbody tr")
    assert rows.count() == 1
    assert rows.first.locator("td").first.inner_text() == "sess-uploaded"

    # Without the job filter the newest ingestion also comes first, by the Ingested header.
    page.get_by_role("link", name="Clear").click()
    page.wait_for_load_state("networkidle")
    assert rows.last.locator("td").first.inner_text() == "sess-uploaded"  # by start date
    header = page.locator("#results thead").get_by_role("link", name=re.compile("^Ingested"))
    header.click()
    page.wait_for_load_state("networkidle")
    page.locator("#results thead").get_by_role("link", name=re.compile("^Ingested.*▲")).click()
    page.locator("#results thead").get_by_role("link", name=re.compile("^Ingested.*▼")).wait_for()
    assert rows.first.locator("td").first.inner_text() == "sess-uploaded"
    shoot_widths(page, "sessions-list")

    rows.first.get_by_role("link", name="sess-uploaded").click()
    page.wait_for_load_state("networkidle")
    assert page.get_by_role("heading", level=1).inner_text() == "Claude Code session sess-uploaded"
    source = page.locator("dl.meta div").filter(has_text="From uploads").locator("dd")
    assert source.inner_text() == f"job #{job_id} fix-the-test.jsonl"
    source.get_by_role("link", name=f"job #{job_id}").click()
    page.wait_for_load_state("networkidle")
    assert page.get_by_role("heading", level=1).inner_text() == "Ingest fix-the-test.jsonl"


def test_an_upload_whose_every_file_is_rejected_says_no_data_and_why(
    page, login, members, workspace, tmp_path
):
    bad = tmp_path / "notes.jsonl"
    bad.write_text('{"hello": "world"}\nnot json at all\n')
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/upload/")
    page.set_input_files("input[type=file]", [str(bad)])
    page.get_by_role("button", name="Upload and ingest").click()
    page.wait_for_load_state("networkidle")
    row = page.locator("table tbody tr").first
    assert row.locator(".badge").inner_text() == "no data"
    assert row.locator(".status-succeeded").count() == 0

    page.goto(f"{page.base_url}/w/{workspace.slug}/jobs/")
    job_row = page.locator("#results tbody tr").first
    assert job_row.locator(".badge").inner_text() == "no data"
    assert (
        "No data: no file of this upload held calls" in job_row.locator(".job-reason").inner_text()
    )
    assert job_row.locator("td").first.inner_text() == "Trace upload"
    job_row.get_by_role("link", name="Ingest notes.jsonl").click()
    page.wait_for_load_state("networkidle")
    assert page.locator("#job-panel .badge").first.inner_text() == "no data"
    assert page.get_by_role("heading", name="Why there is no data").is_visible()
    assert "the reasons are listed below" in page.locator("pre.error-block").inner_text()
    assert page.get_by_text("No session came from this upload.").is_visible()
    # The reasons "listed below" come right after the reason, before what it loaded.
    errors = page.get_by_role("heading", name="Input errors (1)")
    assert page.get_by_text("Nothing could be loaded; here is why, file by file.").is_visible()
    loaded = page.get_by_role("heading", name="What it loaded")
    assert errors.bounding_box()["y"] < loaded.bounding_box()["y"]
    assert page.get_by_role("cell", name="notes.jsonl").first.is_visible()
    assert page.get_by_role("link", name=re.compile("from this upload")).count() == 0
    shoot_widths(page, "job-page-no-data")
