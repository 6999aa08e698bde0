"""Chromium: a reviewer approves a limit, an editor proposes one from a sweep's charts, and a
budget check updates in place."""

import pytest

from governance.models import Membership
from qualification import services
from qualification.models import AssemblyAudit, OperatingLimit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def wait_for_charts(page, count):
    page.wait_for_function(
        f"() => document.querySelectorAll('[data-figure] .main-svg').length >= {count}",
        timeout=20000,
    )


def test_reviewer_approves_a_limit_in_the_browser(
    page, login, members, loaded_qualification, screenshot
):
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["editor"], use_stage_template=True
    )
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/team-a/qualification/limits/")
    row = page.get_by_role("row", name=limit.name)
    assert "proposed" in row.inner_text()
    row.get_by_role("link", name=limit.name).click()
    page.wait_for_url(f"**/qualification/limits/{limit.pk}/")
    review = page.get_by_role("region", name="Review")
    assert "Approving makes this limit immutable" in review.inner_text()
    screenshot("limit-review")
    review.get_by_label("I have read the justification and the flagged changes").check()
    review.get_by_role("button", name="Approve limit").click()
    page.wait_for_load_state("networkidle")
    assert page.get_by_text(f"Approved {limit.name}. It is now the active limit.").is_visible()
    assert page.locator("h1 .badge").inner_text() == "approved"
    assert page.get_by_role("button", name="Approve limit").count() == 0
    assert page.get_by_role("heading", name="Check an assembly").is_visible()
    screenshot("limit-approved")
    limit.refresh_from_db()
    assert limit.status == "approved" and limit.approved_by == members["reviewer"]


def test_the_author_cannot_approve_in_the_browser(page, login, members, loaded_qualification):
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["reviewer"]
    )
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/team-a/qualification/limits/{limit.pk}/")
    assert page.get_by_text(
        "You proposed or edited this limit, so another reviewer must approve it."
    ).is_visible()
    assert page.get_by_role("button", name="Approve limit").count() == 0


def test_editor_reads_the_sweep_and_proposes_a_limit(page, login, loaded_qualification, screenshot):
    login("editor-a")
    page.goto(f"{page.base_url}/w/team-a/qualification/sweeps/{loaded_qualification.pk}/")
    wait_for_charts(page, 4)
    assert page.get_by_test_id("proposed-limit").inner_text() == "16k"
    weakest = page.locator("tr.weakest").first
    assert "code_change" in weakest.inner_text() and "32k" in weakest.inner_text()
    screenshot("sweep-detail")
    page.get_by_role("link", name="Propose operating limit").click()
    page.wait_for_url("**/propose-limit/")
    assert page.get_by_label("Maximum context").input_value() == "16000"
    page.get_by_label("Maximum initial assembly").fill("20000")
    page.get_by_role("button", name="Propose limit").click()
    assert page.get_by_text("At most 12,000: the maximum context minus the reserve.").is_visible()
    page.get_by_label("Maximum initial assembly").fill("12000")
    screenshot("limit-propose-form")
    page.get_by_role("button", name="Propose limit").click()
    page.wait_for_url("**/qualification/limits/*/")
    assert page.get_by_text("You proposed or edited this limit").is_visible()
    assert OperatingLimit.objects.get().stage_budgets[0]["key"] == "ticket_parsing"


def test_budget_check_updates_in_place(page, login, members, loaded_qualification, screenshot):
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["editor"],
        values={"source_limits": {"system": 2000, "retrieved_files": 8000}},
    )  # fmt: skip
    services.operating_limit_approve(
        limit=limit, reviewer=members["reviewer"],
        membership=Membership.objects.get(user=members["reviewer"]), confirmed=True,
    )  # fmt: skip
    login("editor-a")
    page.goto(f"{page.base_url}/w/team-a/qualification/limits/{limit.pk}/")
    page.get_by_label("Tokens 1").fill("1800")
    page.get_by_label("Tokens 2").fill("9500")
    page.get_by_label("Run or session").fill("ticket-77")
    url_before = page.url
    page.get_by_role("button", name="Check and record").click()
    verdict = page.locator(".check-verdict")
    verdict.wait_for()
    assert page.url == url_before  # htmx swapped the region, no navigation
    assert (
        "over" in verdict.inner_text()
        and "retrieved_files 9,500 exceeds its limit of 8,000" in verdict.inner_text()
    )
    assert "ticket-77" in page.locator("#recent-checks").inner_text()  # updated out of band
    screenshot("budget-check")
    audit = AssemblyAudit.objects.get()
    assert (audit.total, audit.run_ref, audit.verdict) == (11300, "ticket-77", "over")
    verdict.get_by_role("link", name=f"Assembly audit #{audit.pk}").click()
    page.wait_for_url(f"**/audits/{audit.pk}/")
    wait_for_charts(page, 1)
    screenshot("audit-detail")
