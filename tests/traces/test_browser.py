"""A person uploads transcripts in Chromium, watches the job finish, and reads the session."""

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_upload_then_read_the_session(page, login, members, workspace, shared_fixtures, screenshot):
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/")
    assert page.get_by_text("No traces yet").is_visible()
    screenshot("traces-empty")
    page.get_by_role("link", name="Upload traces").first.click()
    page.wait_for_load_state("load")
    page.set_input_files(
        "input[type=file]",
        [
            str(
                shared_fixtures
                / "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
            ),
            str(
                shared_fixtures
                / "madshn__localpush__rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
            ),
        ],
    )
    assert page.locator(".chosen-files li").count() == 2
    page.get_by_role("button", name="Upload and ingest").click()
    page.wait_for_load_state("networkidle")
    # Without a broker the job ran within the request: the message says what happened.
    assert page.get_by_text(
        re.compile(r"Upload stored and ingested by job #\d+: 456 calls in 2 sessions\.")
    ).is_visible()
    row = page.locator("table tbody tr").first
    row.locator(".status-succeeded").wait_for()
    assert row.locator("td").nth(4).inner_text() == "456"  # 170 Claude + 286 Codex calls
    screenshot("traces-upload-done")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Sessions").click()
    page.get_by_role("link", name="Empty Repo Setup: CLAUDE.md Foundation Created").click()
    page.locator("#context-timeline.js-plotly-plot").wait_for()
    assert (
        page.evaluate("document.getElementById('context-timeline').data.length") == 6
    )  # main + 5 subagents
    assert page.get_by_role("cell", name="Setup Next.js project").first.is_visible()
    screenshot("traces-session")
    screenshot("traces-session-top", full_page=False)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Sessions").click()
    page.get_by_role("link", name=re.compile("^019c8a59")).click()
    page.locator("#context-timeline.js-plotly-plot").wait_for()
    names = page.evaluate("document.getElementById('context-timeline').data.map(t => t.name)")
    assert names == ["main", "compaction"]
    screenshot("traces-codex-session", full_page=False)


def test_an_upload_of_nothing_readable_fails_honestly(page, login, members, workspace, tmp_path):
    bad = tmp_path / "notes.jsonl"
    bad.write_text('{"hello": "world"}\nnot json at all\n')
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/upload/")
    page.set_input_files("input[type=file]", [str(bad)])
    page.get_by_role("button", name="Upload and ingest").click()
    page.wait_for_load_state("networkidle")
    alert = page.get_by_role("alert").filter(has_text="failed")
    assert re.search(
        r"Upload stored, but ingest job #\d+ failed: No data: no file of this upload held calls",
        alert.inner_text(),
    )
    row = page.locator("table tbody tr").first
    assert row.locator(".status-failed").is_visible()
    assert row.locator(".status-succeeded").count() == 0
