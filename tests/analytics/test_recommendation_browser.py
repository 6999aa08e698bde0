"""The compaction setting to use, on the what-if and operating-limit pages, in Chromium."""

import pytest

from tests.analytics.recommendation_fixtures import MODEL, limit_128k, store_parameters

__all__ = ["limit_128k"]
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_recommended_setting_is_shown_to_paste(
    page, login, workspace, limit_128k, screenshot, width
):
    store_parameters(workspace)
    page.set_viewport_size({"width": width, "height": 1000})
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/what-if/")
    page.get_by_label("Model").fill(MODEL)
    page.get_by_label("Task type", exact=True).select_option("building")
    page.get_by_label("Threshold in use (tokens)").fill("350000")
    page.get_by_role("button", name="Recommend").click()
    headline = page.get_by_test_id("recommended-threshold")
    headline.wait_for()
    assert headline.inner_text() == (
        f"Recommended auto-compact threshold for {MODEL}, building: 115k (115,200 tokens)."
    )
    assert (
        "Clipped by the qualified ECL."
        in page.get_by_test_id("recommendation-clipping").inner_text()
    )
    claude = page.get_by_test_id("claude-setting").inner_text()
    assert "/autocompact 115200" in claude
    assert "export CLAUDE_CODE_AUTO_COMPACT_WINDOW=115200" in claude
    codex = page.get_by_test_id("codex-setting").inner_text()
    assert "model_auto_compact_token_limit = 115200" in codex
    row = page.locator("#recommendation-table tr[data-row='in-use'] td")
    assert row.nth(0).inner_text() == "350k"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.locator("#compaction-recommendation").scroll_into_view_if_needed()
    screenshot(f"recommendation-what-if-{width}", full_page=False)

    page.goto(
        f"{page.base_url}/w/{workspace.slug}/qualification/limits/{limit_128k.pk}/"
        "?task_type=building"
    )
    assert "115k (115,200 tokens)" in page.get_by_test_id("recommended-threshold").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.locator("#compaction-recommendation").scroll_into_view_if_needed()
    screenshot(f"recommendation-limit-{width}", full_page=False)
