"""The after-compaction page in Chromium: Figure 9 with both rates and their bands, the
headline figures with n and interval, and a new phrase-list version saved by an editor."""

import pytest

from tests.analytics.planted_post_compaction import plant
from traces.analytics.services import analytics_refresh_queue
from traces.services import ingest_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_post_compaction_page(page, login, members, workspace, screenshot):
    for name, lines in plant(auto=12, manual=6).sessions.items():
        ingest_bytes(
            workspace=workspace,
            name=f"{name}.jsonl",
            data=b"\n".join(lines) + b"\n",
            source="demo",
            refresh_analytics=False,
        )
    analytics_refresh_queue(workspace=workspace)  # eager: computed on commit
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/post-compaction/")
    page.locator("#post-compaction-chart.js-plotly-plot").wait_for()
    names = page.evaluate("document.getElementById('post-compaction-chart').data.map(t => t.name)")
    assert "correction rate" in names and "tool-error rate" in names
    assert "correction rate: 95% Wilson band" in names
    assert "tool-error rate: 95% Wilson band" in names
    band = page.evaluate(
        "document.getElementById('post-compaction-chart').data.find(t => t.name === 'correction rate: 95% Wilson band').fill"
    )
    assert band == "toself"
    first5 = page.locator("#pc-first5").inner_text()
    assert "n = " in first5 and "[" in first5 and "%" in first5
    ratio = page.locator("#pc-ratio").inner_text()
    assert "×" in ratio and "[" in ratio
    assert "step 20" in page.locator("#pc-elevated").inner_text()
    assert "n = " in page.locator("#pc-tool").inner_text()
    assert page.locator("#pc-by-trigger .badge").inner_text() == "reverse causation possible"
    assert page.locator("#pc-matches mark.phrase").first.inner_text() == "that's wrong"
    screenshot("post-compaction")

    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/post-compaction/phrases/")
    assert "version 1" in page.locator("#phrase-version").inner_text()
    page.get_by_label("Phrases").fill("keep the old signature\nundo")
    page.get_by_role("button", name="Save as version 2").click()
    page.wait_for_load_state("networkidle")
    assert "version 2" in page.locator("#phrase-version").inner_text()
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/post-compaction/")
    page.locator("#post-compaction-chart.js-plotly-plot").wait_for()
    assert page.locator("#pc-matches mark.phrase").first.inner_text() == "keep the old signature"
