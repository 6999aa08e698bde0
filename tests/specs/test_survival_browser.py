"""Chromium: the session page shows what each compaction kept of the spec, an editor corrects
a verdict in place (htmx), and the trace viewer and analytics show the same counts."""

import re

import pytest
from playwright.sync_api import expect

from specs.models import SurvivalVerdict
from tests.specs.test_survival import governing_spec, ingested_session, post_compact

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def no_horizontal_overflow(page):
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_session_page_shows_survival_and_an_editor_corrects_it(
    page, login, screenshot, workspace, members, tmp_path, api_for
):
    governing_spec(workspace, members)
    session = ingested_session(workspace, tmp_path)
    post_compact(api_for("editor"))
    compaction = session.compactions.get()
    login("editor-a")
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(f"{page.base_url}/w/team-a/traces/sessions/{session.pk}/#survival")
        section = page.locator("#survival")
        expect(
            section.get_by_role("heading", name="What each compaction kept of the spec")
        ).to_be_visible()
        row = section.get_by_test_id("survival-row")
        expect(row).to_have_count(1)
        expect(row.get_by_test_id("survival-kept")).to_have_text("3 of 5")
        expect(row.get_by_test_id("survival-lost")).to_have_text("2")
        expect(row).to_contain_text("limit.operating, ui.theme")
        lost = section.locator('[data-testid="survival-item"][data-key="limit.operating"]')
        expect(lost).to_have_attribute("data-verdict", "lost")
        expect(lost).to_contain_text("number 115000 missing")
        assert no_horizontal_overflow(page), width
        section.scroll_into_view_if_needed()
        screenshot(f"survival-session-{width}")

    lost = page.locator('[data-testid="survival-item"][data-key="limit.operating"]')
    lost.get_by_label("Note on limit.operating").fill("115k is the approved limit")
    lost.get_by_role("button", name="Mark kept").click()
    expect(page.get_by_test_id("survival-flash")).to_have_text(
        "limit.operating: kept (your correction)."
    )
    corrected = page.locator('[data-testid="survival-item"][data-key="limit.operating"]')
    expect(corrected).to_have_attribute("data-verdict", "kept")
    expect(corrected.get_by_test_id("survival-corrected")).to_contain_text("corrected by editor-a")
    expect(corrected.get_by_test_id("survival-corrected")).to_contain_text(
        "115k is the approved limit"
    )
    expect(page.get_by_test_id("survival-kept")).to_have_text("4 of 5")
    assert page.evaluate("window.location.pathname").endswith(f"/sessions/{session.pk}/")
    row = SurvivalVerdict.objects.get(key="limit.operating")
    assert (row.kept, row.corrected_kept) == (False, True)
    screenshot("survival-session-corrected-1920")

    # The re-run keeps the correction.
    page.get_by_role("button", name="Audit again").click()
    expect(page.get_by_test_id("survival-flash")).to_have_text(
        "Audited 1 of 1 compaction summaries."
    )
    expect(page.get_by_test_id("survival-kept")).to_have_text("4 of 5")

    run = session.runs.get(started_by=compaction)
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(
            f"{page.base_url}/w/team-a/annotations/sessions/{session.pk}/agents/{run.agent_id}/"
        )
        marker = page.get_by_test_id("viewer-survival")
        expect(marker).to_contain_text("Spec items kept: 4 of 5")
        expect(marker).to_contain_text("lost: ui.theme")
        expect(marker.get_by_role("link", name="what survived")).to_have_attribute(
            "href", f"/w/team-a/traces/sessions/{session.pk}/#survival-detail-{compaction.pk}"
        )
        page.locator(".compaction-sep").evaluate("e => e.scrollIntoView({block: 'center'})")
        screenshot(f"survival-viewer-{width}", full_page=False)

    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(f"{page.base_url}/w/team-a/analytics/compaction-survival/")
        auto = page.locator('[data-testid="survival-trigger"][data-trigger="auto"]')
        expect(auto).to_contain_text(re.compile(r"80\.0% \[\d+\.\d%, \d+\.\d%\] 4 of n = 5 items"))
        expect(page.get_by_text(re.compile("Wilson score interval"))).to_be_visible()
        expect(page.locator('[data-testid="survival-lost-item"]')).to_have_count(1)
        assert no_horizontal_overflow(page), width
        screenshot(f"survival-analytics-{width}")
