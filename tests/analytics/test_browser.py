"""The what-if form redraws the chart as you type."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_what_if_redraws(page, login, members, workspace, screenshot):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/what-if/")
    chart = page.locator("#what-if-chart.js-plotly-plot")
    chart.wait_for()
    assert "seed 001's published values" in page.locator(".lead").inner_text()
    assert "Optimum 220k" in page.locator(".headline").inner_text()
    assert (
        page.locator("#what-if-chart .modebar-btn[data-title='Download plot as SVG']").count() == 1
    )
    assert (
        page.locator("#what-if-chart .modebar-btn[data-title='Download plot as a PNG']").count()
        == 1
    )
    assert (
        page.locator("#what-if-chart .modebar-btn[data-title='Share chart...']").count() == 0
    )  # nothing leaves the app
    first = page.evaluate("document.getElementById('what-if-chart').data[1].x[0]")
    assert round(first) == 219970
    page.get_by_label("P: rediscovery penalty (steps)").fill("55")
    page.wait_for_function(
        "() => { const el = document.getElementById('what-if-chart'); return el && el.data && Math.round(el.data[1].x[0]) === 314341; }"
    )
    assert "Optimum 314k" in page.locator(".headline").inner_text()
    assert "238k–454k" in page.locator(".headline").inner_text()
    screenshot("what-if-redrawn", full_page=False)
    page.get_by_label("D: growth per step").fill("0")
    page.get_by_role("alert").wait_for()
    assert "D must be greater than 0" in page.get_by_role("alert").inner_text()


def test_what_if_reproduces_section_8_1_and_the_degraded_share(
    page, login, members, workspace, screenshot
):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/what-if/")
    page.locator("#scenario-chart.js-plotly-plot").wait_for()
    page.locator("#degraded-chart.js-plotly-plot").wait_for()
    headline = page.locator("#scenario-headline")
    assert "costs 24.7% less per productive step than 600k, bare digest" in headline.inner_text()
    cells = page.locator("#cycle-table tr[data-threshold='220000'] td")
    assert cells.nth(1).inner_text() == "105" and cells.nth(5).inner_text() == "28.6%"
    cells = page.locator("#cycle-table tr[data-threshold='577000'] td")
    assert cells.nth(1).inner_text() == "348" and cells.nth(5).inner_text() == "8.6%"
    assert "default 30 (seed 001 §7.3)" in page.locator("#degraded-headline").inner_text()
    marked = page.evaluate("document.getElementById('degraded-chart').data[1].y")
    assert [round(y, 3) for y in marked] == [0.522, 0.286, 0.177, 0.086, 0.053]
    screenshot("what-if-scenarios", full_page=True)

    # The tail without fewer steps lost: the saving shrinks to 12.4%.
    page.get_by_label("B: P (steps)").fill("28")
    page.wait_for_function(
        "() => (document.getElementById('scenario-headline') || {}).innerText?.includes('12.4%')"
    )
    # A disruption length typed in replaces the default, in the table and the chart.
    page.get_by_label("L: disruption length (steps)").fill("55")
    page.wait_for_function(
        "() => (document.getElementById('degraded-headline') || {}).innerText?.includes('given, 55 steps')"
    )
    assert (
        page.locator("#cycle-table tr[data-threshold='220000'] td").nth(5).inner_text() == "52.4%"
    )
    # Another S: the scenarios move with it...
    page.get_by_label("S: post-compaction context").fill("70000")
    page.wait_for_function(
        "() => (document.querySelector('#cycle-table tr[data-threshold=\"220000\"]') || {}).innerText?.includes('145k')"
    )
    assert "24.7%" not in page.locator("#scenario-headline").inner_text()
    # ...and one click goes back to the seed's §8.1, on the seed's S, D, SUMM and P.
    page.locator("#preset-8-1").click()
    page.wait_for_function(
        "() => (document.getElementById('scenario-headline') || {}).innerText?.includes('24.7%')"
    )
    assert page.get_by_label("B: P (steps)").input_value() == "14"
    assert page.get_by_label("A: threshold T").input_value() == "600000"
    assert page.get_by_label("S: post-compaction context").input_value() == "65588"
    assert page.get_by_label("L: disruption length (steps)").input_value() == ""  # default again
