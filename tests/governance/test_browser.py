"""A person signs in with Chromium and sees their workspace dashboard."""

import pytest

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
