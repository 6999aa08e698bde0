"""Chromium at 1280 px: the sessions table needs no horizontal scroll inside its wrapper
(every column, cost and the sortable Ingested header included, in view), and the analytics
tabs sit on one line, each reachable. At 1920 px the same holds."""

import re

import pytest

from traces.models import Session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WRAP = """() => Array.from(document.querySelectorAll('.table-wrap')).map(w =>
  ({scroll: w.scrollWidth, client: w.clientWidth,
    right: w.getBoundingClientRect().right,
    last: w.querySelector('thead th:last-child').getBoundingClientRect().right}))"""
TABS = """() => Array.from(document.querySelectorAll('nav.tabs a')).map(a => {
  const box = a.getBoundingClientRect();
  return {text: a.textContent, top: Math.round(box.top), right: box.right, title: a.title};
})"""


@pytest.fixture
def titled(named_sessions):
    """The named sessions, two of them with long titles and long projects, as in the demo."""
    for index, session in enumerate(named_sessions[:2]):
        Session.objects.filter(pk=session.pk).update(
            title=f"Refund reason codes in the checkout refund flow, part {index}",
            project=f"/home/developer/workspaces/checkout-service-{index}",
        )
    return named_sessions


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_sessions_table_fits_without_an_inner_scroll(
    page, login, members, titled, width, screenshot
):
    login("viewer-a")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(page.base_url + "/w/team-a/traces/")
    (wrap,) = page.evaluate(WRAP)
    screenshot(f"sessions-{width}")
    assert wrap["scroll"] <= wrap["client"], wrap  # nothing to scroll to inside the table
    assert wrap["last"] <= wrap["right"] + 1, wrap  # the cost column is in view
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    headers = page.locator(".table-wrap thead th")
    names = [" ".join(headers.nth(i).inner_text().split()) for i in range(headers.count())]
    assert names[0] == "Session" and names[-1] == "Cost"
    assert any(name.startswith("Tokens in · out") for name in names)
    rows = page.locator(".table-wrap tbody tr")
    assert rows.count() == 4
    # Ingested is visible and sorts (the upload-walk test clicks it).
    ingested = page.locator("#results thead").get_by_role("link", name=re.compile("^Ingested"))
    assert ingested.is_visible()
    ingested.click()
    page.locator("#results thead").get_by_role("link", name=re.compile("^Ingested.*▲")).wait_for()
    # Output tokens sort from the tokens header.
    page.locator("#results thead").get_by_role("link", name=re.compile("^out")).click()
    page.locator("#results thead").get_by_role("link", name=re.compile("^out ▲")).wait_for()
    (wrap,) = page.evaluate(WRAP)
    assert wrap["scroll"] <= wrap["client"], wrap


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_analytics_tabs_are_on_one_line_and_each_is_reachable(
    page, login, members, workspace, width, screenshot
):
    login("viewer-a")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(page.base_url + "/w/team-a/analytics/")
    tabs = page.evaluate(TABS)
    screenshot(f"analytics-tabs-{width}")
    assert len(tabs) == 9
    assert len({tab["top"] for tab in tabs}) == 1, tabs  # one line
    nav_right = page.evaluate("document.querySelector('nav.tabs').getBoundingClientRect().right")
    assert all(tab["right"] <= nav_right + 1 for tab in tabs), tabs
    assert {tab["title"] for tab in tabs if tab["title"]} >= {"Cost of context", "Steps per agent"}
    for label, heading_path in [("What-if", "/analytics/what-if/"), ("Survival", "/analytics/compaction-survival/")]:  # fmt: skip
        page.locator("nav.tabs").get_by_role("link", name=label, exact=True).click()
        page.wait_for_url(re.compile(re.escape(heading_path)))
        again = page.evaluate(TABS)
        assert len({tab["top"] for tab in again}) == 1, (label, again)
