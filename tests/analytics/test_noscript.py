"""Without JavaScript, each chart's box says that the chart needs it and links its data."""

import pytest

from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_charts_without_javascript_say_so_and_link_their_csv(
    browser, live_server, members, workspace
):
    context = browser.new_context(
        java_script_enabled=False, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("viewer-a")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/w/{workspace.slug}/analytics/what-if/")
    boxes = page.locator(".chart")
    assert boxes.count() == 4  # cost curve, degraded share, scenarios, sensitivity
    for index in range(boxes.count()):
        box = boxes.nth(index)
        assert box.inner_text().startswith("This chart needs JavaScript.")
        link = box.get_by_role("link", name="Download its data as CSV")
        href = link.get_attribute("href")
        response = page.request.get(
            page.url + href if not href.startswith("/") else live_server.url + href
        )
        assert response.status == 200
        assert response.headers["content-type"].startswith("text/csv")
        assert len(response.text().splitlines()) > 2  # a header and rows
    context.close()
