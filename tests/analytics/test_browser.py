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
