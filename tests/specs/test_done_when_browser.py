"""Issue 16, done when: in Chromium, on the demo, an author drafts a high-consequence version
that drops a settled item and resolves an open question; a second person reviews the diff,
acknowledges both and approves; then a restart package picks its trace session by search and
is downloaded. Each step asserts what the page shows."""

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from traces.models import Session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SPEC = "/w/demo/specs"
RESOLUTION = "The backfill runs outside business hours only, from 22:00 to 05:00."


def unique(session) -> bool:
    """Whether the first 6 characters of the session's id name it alone in the demo."""
    text = session.external_id[:6].lower()
    matches = [
        other
        for other in Session.objects.filter(workspace=session.workspace)
        if other.external_id.lower().startswith(text)
        or text in other.title.lower()
        or text in other.project.lower()
    ]
    return matches == [session]


def sign_in(page, username: str) -> None:
    page.goto(f"{page.base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"{username}-demo-pass")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/w/demo/")


def test_draft_review_approve_and_export_a_restart_package(page, screenshot, tmp_path):
    call_command("seed_demo", stdout=io.StringIO())

    # The author drafts v4 of the refunds migration: drops a settled definition and settles
    # the open question.
    sign_in(page, "editor")
    page.goto(f"{page.base_url}{SPEC}/refund-api-migration/")
    page.get_by_role("link", name="New version from v3").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "New version of Refund API v2 migration"
    )
    settled = page.locator("[data-item]", has=page.locator('input[value="refund-settled"]'))
    settled.get_by_role("button", name="Remove item").click()
    expect(page.locator('input[value="refund-settled"]')).to_have_count(0)
    question = page.locator("[data-item]", has=page.locator('input[value="backfill-window"]'))
    question.get_by_label("Status").select_option("settled")
    question.get_by_label("Text").fill(RESOLUTION)
    page.get_by_label("Note").fill("Settles the backfill window; the settled definition moves out.")
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(re.compile(r".*/specs/versions/\d+/$"))
    expect(page.locator("main")).to_contain_text(
        "It resolves 1 open question and drops 1 settled item; the reviewer will acknowledge "
        "each: backfill-window, refund-settled."
    )
    page.get_by_role("button", name="Submit for review").click()
    page.wait_for_load_state("networkidle")
    review = page.locator("#review")
    expect(review).to_contain_text("You wrote this version.")
    expect(review.locator(".resolution")).to_have_count(2)
    expect(review).to_contain_text("Omitted. This settled definition is no longer in the spec.")
    version_url = page.url
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/accounts/login/")

    # A reviewer, another person, reads the comparison, acknowledges both keys and approves.
    sign_in(page, "reviewer")
    page.goto(version_url)
    expect(page.get_by_role("heading", level=1)).to_contain_text("in review")
    expect(page.get_by_role("heading", name="Review", exact=True)).to_be_visible()
    approve = page.get_by_role("button", name="Approve v4 and supersede v3")
    expect(approve).to_be_disabled()
    page.get_by_role("link", name="Side-by-side comparison with v3 →").click()
    page.wait_for_url(re.compile(r".*/diff/.*"))
    dropped = page.locator("#diff-refund-settled")
    expect(dropped.locator(".diff-after")).to_have_text("— omitted from v4")
    expect(dropped.locator(".diff-before")).to_contain_text("A refund is settled when")
    resolved = page.locator("#diff-backfill-window")
    expect(resolved.locator(".diff-before")).to_contain_text("May the backfill run during")
    expect(resolved.locator(".diff-after")).to_contain_text(RESOLUTION)
    screenshot("done-when-diff")
    page.go_back()
    page.wait_for_load_state("networkidle")
    review = page.locator("#review")
    expect(review).to_contain_text(
        "This version resolves 1 open question and drops 1 settled item."
    )
    review.get_by_label(re.compile("I acknowledge that v4 resolves backfill-window")).check()
    expect(approve).to_be_disabled()
    review.get_by_label(
        re.compile("I acknowledge that v4 drops the settled refund-settled")
    ).check()
    expect(approve).to_be_enabled()
    approve.click()
    page.wait_for_load_state("networkidle")
    expect(page.get_by_role("heading", level=1)).to_contain_text("authoritative")
    details = page.locator("dl").filter(has_text="Acknowledged")
    expect(details).to_contain_text("backfill-window, refund-settled")
    screenshot("done-when-approved")

    # The restart package pins v4 and names its session by a prefix of the session id.
    session = next(
        s for s in Session.objects.filter(workspace__slug="demo").order_by("pk") if unique(s)
    )
    page.goto(f"{page.base_url}{SPEC}/restart-packages/new/")
    pin = page.get_by_role("combobox", name="Specification")
    pin.select_option(pin.locator("option", has_text="Refund API v2 migration · v4").inner_text())
    search = page.get_by_label("Trace session")
    search.press_sequentially(session.external_id[:6])
    options = page.locator("#trace-session-options option")
    expect(options).to_have_count(1)  # htmx narrowed the suggestions to the one match
    expect(options).to_have_attribute("value", session.external_id)
    search.fill(options.first.get_attribute("value"))
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(f"restart-form-{width}")
    page.get_by_label(re.compile(r"^Commit")).fill("abcdef1")
    page.get_by_label("Next action").fill("Run the backfill tonight and verify the counts.")
    page.get_by_role("button", name="Build restart package").click()
    page.wait_for_url(re.compile(r".*/restart-packages/\d+/$"))
    expect(page.locator(".message.success")).to_contain_text("Built restart package")
    expect(page.get_by_role("link", name=str(session))).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("link", name="Download Markdown").click()
    markdown = (tmp_path / "package.md").resolve()
    download.value.save_as(markdown)
    text = markdown.read_text()
    assert "backfill-window" in text and RESOLUTION in text
    assert "refund-settled" not in text
    assert "abcdef1" in text
