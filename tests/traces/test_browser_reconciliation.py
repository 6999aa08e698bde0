"""The workspace's "Sources compared" page in Chromium: the day's totals of a transcript
and its telemetry (sent by the real SDK exporter), with a planted disagreement counted."""

import pytest

from tests.traces.test_call_join import reference_calls, send_events, transcript_lines

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def token(workspace, members):
    from governance.services import api_token_create

    return api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext


def test_reconciliation_page_shows_the_days_sources(
    page, login, members, workspace, live_server, token, tmp_path, ingest, screenshot
):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/reconciliation/")
    assert page.get_by_text("No telemetry to compare yet").is_visible()
    screenshot("reconciliation-empty")

    lines = transcript_lines(6)
    reference = reference_calls(lines)
    planted = sorted(reference)[1]
    send_events(live_server, token, reference, planted=(planted, "output_tokens", 9_999))
    path = tmp_path / "p" / "s.jsonl"
    path.parent.mkdir()
    path.write_text("".join(__import__("json").dumps(line) + "\n" for line in lines))
    ingest(path)

    # The events are dated 2026-01-01, beyond the page's 90 days from now: show them all.
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/reconciliation/?days=3650")
    page.locator("#reconciliation-chart.js-plotly-plot").wait_for()
    table = page.get_by_test_id("reconciliation-table")
    event_row = table.locator("tr", has_text="event")
    cells = event_row.locator("td").all_inner_texts()
    expected_output = sum(c["output_tokens"] for c in reference.values())
    expected_output += 9_999 - reference[planted]["output_tokens"]
    assert cells[0] == "2026-01-01" and cells[2] == "6"
    assert cells[6] == f"{expected_output:,}"
    assert cells[8].startswith("1 of 6")
    names = page.evaluate("document.getElementById('reconciliation-chart').data.map(t => t.name)")
    assert names == ["transcript", "event", "calls with a disagreement"]
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        page.locator("#reconciliation-chart.js-plotly-plot").wait_for()
        screenshot(f"reconciliation-{width}")
        overflow = "document.documentElement.scrollWidth - window.innerWidth"
        assert page.evaluate(overflow) <= 0

    # The session's page lists the call, the field and each source's value.
    from traces.models import Session

    session = Session.objects.get(workspace=workspace, harness="claude-code")
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/sessions/{session.pk}/#sources")
    row = page.get_by_test_id("sources-disagreements").locator("tbody tr")
    assert row.count() == 1
    cells = row.first.locator("td").all_inner_texts()
    assert cells[3:] == ["output", f"{reference[planted]['output_tokens']:,}", "–", "9,999"]
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        page.get_by_test_id("sources-summary").scroll_into_view_if_needed()
        screenshot(f"session-sources-{width}", full_page=False)
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
