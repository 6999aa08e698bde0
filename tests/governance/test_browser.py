"""A person signs in with Chromium and sees their workspace dashboard."""

import pytest

from governance.models import Role
from governance.services import membership_set
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_login_and_dashboard(page, login, members, workspace, screenshot):
    page.goto(f"{page.base_url}/w/{workspace.slug}/")
    assert "/accounts/login/" in page.url
    login("editor-a", "wrong-password")
    assert page.get_by_text("That username and password do not match").is_visible()
    login("editor-a")
    page.goto(f"{page.base_url}/")
    page.wait_for_url(f"**/w/{workspace.slug}/")
    assert page.get_by_role("heading", name="Team A", level=1).is_visible()
    assert (
        page.get_by_role("navigation", name="Main")
        .get_by_role("link", name="Dashboard")
        .get_attribute("aria-current")
        == "page"
    )
    assert page.locator(".role-badge").inner_text() == "editor"
    screenshot("dashboard")
    # Keyboard users can reach the content directly.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/accounts/login/")


def test_workspace_switcher_waits_for_the_switch_button(
    page, login, members, workspace, other_workspace, screenshot
):
    membership_set(workspace=other_workspace, user=members["editor"], role=Role.VIEWER)
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/")
    switcher = page.get_by_label("Workspace")
    assert switcher.get_attribute("onchange") is None
    screenshot("base-layout-switcher")
    # Arrowing through the options with the keyboard does not navigate away.
    switcher.focus()
    page.keyboard.press("ArrowDown")
    assert switcher.input_value() == other_workspace.slug
    page.wait_for_timeout(300)
    assert page.url == f"{page.base_url}/w/{workspace.slug}/"
    page.get_by_role("button", name="Switch").click()
    page.wait_for_url(f"**/w/{other_workspace.slug}/")
    assert page.get_by_label("Workspace").input_value() == other_workspace.slug
    assert page.locator(".role-badge").inner_text() == "viewer"


def test_switcher_works_without_javascript(
    browser, live_server, members, workspace, other_workspace
):
    membership_set(workspace=other_workspace, user=members["editor"], role=Role.VIEWER)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        page.get_by_label("Username").fill("editor-a")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"**/w/{workspace.slug}/")
        page.get_by_label("Workspace").select_option(other_workspace.slug)
        page.get_by_role("button", name="Switch").click()
        page.wait_for_url(f"**/w/{other_workspace.slug}/")
    finally:
        context.close()


def test_failed_htmx_request_shows_a_message(page, login, members, workspace, screenshot):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/settings/tokens/")
    box = page.locator("#request-error")
    assert box.is_hidden()
    # A stale CSRF token (the page was open across a new login, say): the server answers
    # 403 and htmx swaps nothing, so app.js must say what happened.
    page.evaluate(
        """htmx.ajax("POST", location.pathname, {target: "#main", values: {name: "x"},
                     headers: {"X-CSRFToken": "stale"}})"""
    )
    box.wait_for(state="visible")
    assert box.get_by_role("paragraph").inner_text() == (
        "Your form expired or was sent from another site, so nothing was saved. "
        "Reload the page and try again."
    )
    screenshot("htmx-csrf-failure")
    box.get_by_role("button", name="Dismiss").click()
    assert box.is_hidden()


def test_htmx_request_after_the_session_ended_opens_the_login_page(page, login, members, workspace):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/jobs/")
    page.context.clear_cookies()
    page.evaluate('htmx.ajax("GET", location.pathname + "?page=1", {target: "#main"})')
    page.wait_for_url(lambda url: "/accounts/login/" in url)
    assert page.url.endswith(f"/accounts/login/?next=/w/{workspace.slug}/jobs/")
    assert page.get_by_text("your session has expired").is_visible()
    # The whole window shows the login page, not a panel of the old one.
    assert page.locator("nav.sidebar").count() == 0
