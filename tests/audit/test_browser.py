"""In Chromium: a reviewer creates an audit on ingested runs, judges one step of a packet in
the browser, and sees the results change."""

import pytest

from traces.audit.models import Audit, Judgment

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_create_judge_and_see_results(page, login, members, corpus, screenshot):
    slug = corpus[0].workspace.slug
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/{slug}/audits/")
    assert page.get_by_text("No audits yet").is_visible()
    page.get_by_role("link", name="New audit").first.click()
    page.get_by_label("Name").fill("Browser audit")
    page.get_by_label("Seed").fill("5")
    assert page.get_by_label("Exclude forked starts").is_checked()
    sizes = page.locator("table.strata input[type=number]")
    strata = sizes.count()
    assert strata >= 1
    for i in range(strata):
        sizes.nth(i).fill("1")
    screenshot("audit-create", full_page=False)
    with page.expect_navigation():
        page.get_by_role("button", name="Create audit").click()
    audit = Audit.objects.get(name="Browser audit")
    assert audit.seed == 5 and audit.status == "open"
    # One step asked from each stratum; a run crossing bands can give steps to several.
    assert audit.step_count == strata and 1 <= audit.packet_count <= strata
    assert audit.exclude_forks is True

    page.goto(f"{page.base_url}/w/{slug}/audits/{audit.pk}/results/")
    assert page.get_by_text("No judgments yet").is_visible()

    page.goto(f"{page.base_url}/w/{slug}/audits/{audit.pk}/")
    page.get_by_role("link", name="Judge the next step").click()
    page.wait_for_load_state("domcontentloaded")
    assert page.get_by_role("heading", name="What the agent had").is_visible()
    boxes = page.locator("input[name=active_item_ids]")
    ticked = min(2, boxes.count())
    for i in range(ticked):
        boxes.nth(i).check()
    page.get_by_label("A verbatim form of older context was needed").check()
    page.get_by_label("Materially degraded").check()
    page.get_by_label("High").check()
    screenshot("audit-judge", full_page=False)
    with page.expect_navigation():
        page.get_by_role("button", name="Save and go to the next step").click()
    judgment = Judgment.objects.get()
    assert judgment.judge_kind == "human" and judgment.judge_label == "reviewer-a"
    assert judgment.active_item_ids == list(range(1, ticked + 1))
    assert judgment.verbatim_needed and judgment.counterfactual == "materially_degraded"
    assert page.get_by_text("judged.").first.is_visible()

    page.goto(f"{page.base_url}/w/{slug}/audits/{audit.pk}/results/")
    assert "1 step judged" in page.locator("#results-n").inner_text()
    row = page.locator("#counterfactual-table tr", has_text="Materially degraded")
    assert "1 / 1" in row.inner_text()
    verbatim = page.locator("#verbatim-table tr", has_text="All")
    assert "1 / 1" in verbatim.inner_text()
    page.wait_for_function("() => !!document.querySelector('#active-by-band .main-svg')")
    screenshot("audit-results")


def test_close_and_reopen_an_audit(page, login, members, audit, screenshot):
    from governance.models import AuditEvent

    slug = audit.workspace.slug
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/{slug}/audits/{audit.pk}/")
    assert page.get_by_role("link", name="Judge the next step").is_visible()
    with page.expect_navigation():
        page.get_by_role("button", name="Close the audit").click()
    assert page.get_by_text("closed: it takes no more judgments").is_visible()
    assert page.get_by_role("button", name="Reopen the audit").is_visible()
    assert page.get_by_role("link", name="Judge the next step").count() == 0
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        screenshot(f"audit-closed-{width}", full_page=False)
    audit.refresh_from_db()
    assert audit.status == "closed"
    with page.expect_navigation():
        page.get_by_role("button", name="Reopen the audit").click()
    assert page.get_by_text("reopened: its steps can be judged again").is_visible()
    assert page.get_by_role("link", name="Judge the next step").is_visible()
    audit.refresh_from_db()
    assert audit.status == "open"
    actions = list(
        AuditEvent.objects.filter(action__startswith="audit.").values_list("action", flat=True)
    )
    assert actions.count("audit.closed") == 1 and actions.count("audit.open") == 1
