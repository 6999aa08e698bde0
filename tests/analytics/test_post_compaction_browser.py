"""The after-compaction page in Chromium: Figure 9 with both rates and their bands, the
headline figures with n and interval, the count of every counted correction with the link
that downloads them all, and a new phrase-list version saved by an editor."""

import csv

import pytest

from tests.analytics.planted_post_compaction import plant
from traces.analytics.post_compaction_views import MATCHES_SHOWN
from traces.analytics.selectors import AnalyticsFilters, result_for
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
    # Every counted correction: the page says how many, shows the first 200, links them all.
    total = result_for(workspace=workspace, filters=AnalyticsFilters()).result["post_compaction"][
        "matches_total"
    ]
    assert total > MATCHES_SHOWN
    summary = page.locator("#pc-matches-total").inner_text()
    assert f"first {MATCHES_SHOWN} of {total:,}" in summary
    assert f"download all {total:,}" in summary
    assert page.locator("#pc-matches tbody tr").count() == MATCHES_SHOWN
    with page.expect_download() as download:
        page.locator("#pc-matches-csv").click()
    with open(download.value.path(), newline="") as exported:
        rows = list(csv.DictReader(exported))
    assert len(rows) == total
    assert rows[0]["phrase"] == "that's wrong" and rows[0]["match"] == "stored"
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
