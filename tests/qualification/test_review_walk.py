"""Chromium, as a reviewer: review and approve a limit end to end, from the home page's
"Waiting for you" to the comment on the limit and in the audit log; and the qualification page
leads with the limit awaiting review."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 1920)
COMMENT = "Stage budgets move to the harness config; memory and history are capped by the total."


def box(locator) -> dict:
    value = locator.bounding_box()
    assert value is not None, locator
    return value


def bottom(locator) -> float:
    b = box(locator)
    return b["y"] + b["height"]


def shoot_widths(page, screenshot, name):
    """Screenshots at 1280 and 1920 px (kept when GOVERNANCE_SCREENSHOTS names a folder)."""
    size = page.viewport_size
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        # Plotly redraws responsive charts after the resize: wait until each fits its box.
        page.wait_for_function(
            """() => [...document.querySelectorAll('[data-figure] .main-svg')].every(
                svg => svg.getBoundingClientRect().right
                    <= svg.closest('[data-figure]').getBoundingClientRect().right + 1)"""
        )
        screenshot(f"{name}-{width}")
    page.set_viewport_size(size)


def test_reviewer_reviews_and_approves_a_limit(page, login, dropping_successor, screenshot):
    limit = dropping_successor
    login("reviewer-a")

    # Home: the limit waits for this reviewer, near the top of the page.
    page.goto(f"{page.base_url}/w/team-a/")
    waiting = page.get_by_role("region", name=re.compile("^Waiting for you"))
    expect(waiting).to_be_visible()
    link = waiting.get_by_role("link", name=f"Limit #{limit.pk} awaits your review")
    expect(link).to_be_visible()
    assert bottom(link) < page.viewport_size["height"]
    expect(waiting).to_contain_text("Agents v2")
    shoot_widths(page, screenshot, "home")
    link.click()
    page.wait_for_url(f"**/qualification/limits/{limit.pk}/")

    # The limit: justification, thumbnail and flags, all before the button.
    expect(page.locator("h1 .badge")).to_have_text("proposed")
    why = page.get_by_role("region", name="Why these numbers")
    expect(why).to_contain_text("Weakest family")
    expect(why).to_contain_text("code_change")
    expect(why.get_by_text("Fewer knobs.")).to_be_visible()
    page.wait_for_function("() => document.querySelector('#limit-decline .main-svg') !== null")
    thumbnail = page.locator("#limit-decline")
    expect(thumbnail).to_be_visible()
    drawing = thumbnail.locator(".main-svg").first
    assert 150 < box(thumbnail)["height"] < 400  # a thumbnail, not the full chart
    assert bottom(drawing) <= bottom(thumbnail) + 1  # the drawing fits its box
    flags = page.get_by_role("group", name=re.compile("removed or loosened"))
    expect(flags).to_contain_text("8 values are removed or loosened")
    items = flags.get_by_role("listitem")
    expect(items).to_have_count(8)
    texts = items.all_inner_texts()
    assert "removed: stage plan_generation budget 12k" in texts
    assert "removed: source history limit 6k" in texts
    assert "removed: source memory limit 1k" in texts
    assert "loosened: source system limit 3k → 3.5k" in texts
    approve = page.get_by_role("button", name="Approve limit")
    for earlier in (why, thumbnail, flags):
        assert box(approve)["y"] > bottom(earlier)
    shoot_widths(page, screenshot, "limit-review")

    # Without the confirmation the server refuses, and says why.
    comment = page.get_by_label("Comment (optional)")
    comment.fill(COMMENT)
    approve.click()
    page.wait_for_load_state("networkidle")
    error = page.get_by_role("alert").filter(has_text="I have read the justification")
    expect(error).to_be_visible()
    expect(error).to_be_in_viewport()  # the answer opens at the form, not at the page's top
    expect(page.locator("h1 .badge")).to_have_text("proposed")
    expect(comment).to_have_value(COMMENT)
    screenshot("limit-review-refused")

    # Confirmed, with the comment: approved, and the comment is on the limit.
    page.get_by_label("I have read the justification and the flagged changes").check()
    page.get_by_role("button", name="Approve limit").click()
    # The redirect keeps the form's #approve-form; the approved page has no such form.
    page.wait_for_url(re.compile(rf"/qualification/limits/{limit.pk}/(#approve-form)?$"))
    expect(page.get_by_text(f"Approved {limit.name}. It is now the active limit.")).to_be_visible()
    expect(page.locator("h1 .badge")).to_have_text("approved")
    approval = page.get_by_test_id("approval")
    expect(approval).to_contain_text("Approved by reviewer-a on ")
    expect(approval).to_contain_text(f": {COMMENT}")
    expect(page.get_by_role("button", name="Approve limit")).to_have_count(0)
    shoot_widths(page, screenshot, "limit-approved")

    # The audit log has the approval with the comment.
    page.goto(f"{page.base_url}/w/team-a/settings/audit/?action=operating_limit.approve")
    row = (
        page.get_by_role("row")
        .filter(has_text="Operating limit approved")
        .filter(has_text="Agents v2")
    )
    expect(row).to_have_count(1)
    expect(row).to_contain_text("reviewer-a")
    expect(row).to_contain_text(COMMENT)


def test_the_qualification_page_leads_with_the_limit_awaiting_review(
    page, login, dropping_successor, screenshot
):
    limit = dropping_successor
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/team-a/qualification/sweeps/{limit.qualification_id}/")
    lead = page.get_by_role("link", name=f"Limit #{limit.pk} awaits your review")
    expect(lead).to_be_visible()
    assert bottom(lead) < page.viewport_size["height"]  # at the top, not 5,000 px down
    assert "primary" in lead.get_attribute("class")
    propose = page.get_by_role("link", name="Propose operating limit")
    assert "primary" not in propose.get_attribute("class")
    screenshot("qualification-review-lead")
    lead.click()
    page.wait_for_url(f"**/qualification/limits/{limit.pk}/")
    expect(page.get_by_role("heading", name="Review", exact=True)).to_be_visible()


def test_nothing_waiting_says_what_to_do_next(page, login, members, screenshot):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/team-a/")
    waiting = page.get_by_role("region", name=re.compile("^Waiting for you"))
    expect(waiting.get_by_text("Nothing is waiting for you.")).to_be_visible()
    expect(waiting.get_by_role("link", name="operating limits")).to_be_visible()
    shoot_widths(page, screenshot, "home-empty")
