"""Chromium: a reviewer acknowledges resolved questions before approving; the editor adds and
removes rows without reloading; the pages people read are screenshotted."""

import re

import pytest
from playwright.sync_api import expect

from specs import services
from specs.models import SpecVersion, VersionStatus
from tests.specs.conftest import BASE_ITEMS, resolved

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def in_review(authoritative, members):
    spec, v1 = authoritative()
    v2 = services.spec_version_create(
        spec=spec,
        author=members["editor"],
        supersedes=v1,
        items=resolved(BASE_ITEMS),
        note="Settles where raw tool output lives.",
    )
    services.spec_version_submit(version=v2, actor=members["editor"])
    return spec, v1, v2


def test_reviewer_approves_only_after_acknowledging_resolved_questions(
    page, login, in_review, screenshot
):
    _spec, v1, v2 = in_review
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/team-a/specs/versions/{v2.pk}/")
    review = page.locator("#review")
    expect(review.get_by_role("heading", name="Review")).to_be_visible()
    acknowledgement = review.get_by_label(re.compile("I acknowledge that v2 resolves storage"))
    approve = review.get_by_role("button", name="Approve v2 and supersede v1")
    # The resolved question is listed before the decision buttons.
    assert acknowledgement.bounding_box()["y"] < approve.bounding_box()["y"]
    expect(review.get_by_text("Where does raw tool output live?")).to_be_visible()
    expect(approve).to_be_disabled()
    expect(review.get_by_text("Acknowledged 0 of 1 items")).to_be_visible()
    screenshot("specs-review-before-acknowledging")

    # Forcing the button past the browser does not help: the server refuses.
    page.evaluate("document.querySelector('[data-approve]').disabled = false")
    approve.click()
    page.wait_for_load_state("networkidle")
    expect(
        page.get_by_role("alert").filter(has_text="must acknowledge each by key")
    ).to_be_visible()
    assert SpecVersion.objects.get(pk=v2.pk).status == VersionStatus.IN_REVIEW

    page.locator("#review").get_by_label(
        re.compile("I acknowledge that v2 resolves storage")
    ).check()
    approve = page.locator("#review").get_by_role("button", name="Approve v2 and supersede v1")
    expect(approve).to_be_enabled()
    approve.click()
    page.wait_for_url(f"**/specs/versions/{v2.pk}/")
    expect(page.get_by_text("Approved: Payments API v2 is now authoritative.")).to_be_visible()
    expect(page.locator("h1 .badge.status-authoritative")).to_have_text("authoritative")
    screenshot("specs-review-approved")
    v2.refresh_from_db()
    v1.refresh_from_db()
    assert (v2.status, v1.status, v2.acknowledged_resolutions) == (
        "authoritative",
        "superseded",
        ["storage"],
    )


def test_author_cannot_approve_their_own_version_in_the_browser(page, login, in_review):
    _spec, _v1, v2 = in_review
    login("editor-a")
    page.goto(f"{page.base_url}/w/team-a/specs/versions/{v2.pk}/")
    expect(page.get_by_text("You wrote this version.")).to_be_visible()
    expect(page.get_by_role("button", name=re.compile("Approve"))).to_have_count(0)


def test_editor_adds_and_removes_items_without_reloading(page, login, authoritative, screenshot):
    spec, v1 = authoritative()
    login("editor-a")
    page.goto(f"{page.base_url}/w/team-a/specs/payments/versions/new/")
    items = page.locator("#items > [data-item]")
    expect(items).to_have_count(3)
    page.evaluate("window.__notReloaded = true")

    page.get_by_role("button", name="Add item").click()
    expect(items).to_have_count(4)
    new_item = items.nth(3)
    expect(new_item.get_by_label("Text")).to_be_focused()
    new_item.get_by_label("Kind").select_option("interface")
    new_item.get_by_label("Text").fill("POST /v2/refunds returns 201 with the refund id")
    expect(new_item.get_by_label("Key")).to_have_value("post-v2-refunds-returns")
    new_item.get_by_role("button", name="Add alternative").click()
    expect(new_item.locator("[data-row]")).to_have_count(1)
    new_item.get_by_label("Alternative", exact=True).fill("PUT /v2/refunds/{id}")
    new_item.get_by_label("Evidence for it").fill("Idempotent by construction; clients dislike it.")

    page.get_by_role("button", name="Add item").click()
    expect(items).to_have_count(5)
    question = items.nth(4)
    question.get_by_label("Kind").select_option("open_question")
    expect(question.get_by_label("Status")).to_have_value("unresolved")
    question.get_by_label("Text").fill("Do refunds need a reason code?")
    question.get_by_role("button", name="Remove item").click()
    expect(items).to_have_count(4)

    # Remove the 'retention' constraint, rename the suggested key by hand.
    items.nth(1).get_by_role("button", name="Remove item").click()
    expect(items).to_have_count(3)
    key = items.nth(2).get_by_label("Key")
    key.fill("refund-v2-endpoint")
    items.nth(2).get_by_label("Text").fill(
        "POST /v2/refunds returns 201 with the refund id and status"
    )
    page.wait_for_timeout(400)
    expect(key).to_have_value("refund-v2-endpoint")
    assert page.evaluate("window.__notReloaded") is True
    screenshot("specs-editor")

    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url("**/specs/versions/*/")
    expect(page.get_by_text("Saved draft v2.")).to_be_visible()
    draft = SpecVersion.objects.get(spec=spec, number=2)
    saved = {item.key: item for item in draft.as_items()}
    assert set(saved) == {"api-compat", "storage", "refund-v2-endpoint"}
    assert saved["refund-v2-endpoint"].kind == "interface"
    assert saved["refund-v2-endpoint"].alternatives[0].evidence.startswith("Idempotent")
    assert draft.supersedes_id == v1.pk


def test_pages_people_read(page, login, in_review, make_package, screenshot):
    _spec, v1, v2 = in_review
    package = make_package(v1)
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/team-a/specs/")
    expect(page.get_by_role("link", name="Payments API")).to_be_visible()
    screenshot("specs-list")
    page.goto(f"{page.base_url}/w/team-a/specs/payments/")
    expect(page.get_by_role("heading", name="Chain of authority")).to_be_visible()
    screenshot("specs-detail")
    page.goto(f"{page.base_url}/w/team-a/specs/versions/{v2.pk}/diff/")
    expect(page.locator("tr.diff-resolved")).to_have_count(1)
    page.get_by_role("link", name=re.compile("^All")).click()
    expect(page.locator("tr.diff-retained")).to_have_count(2)
    screenshot("specs-diff")
    page.goto(f"{page.base_url}/w/team-a/specs/review/")
    expect(page.get_by_role("link", name="Payments API v2")).to_be_visible()
    screenshot("specs-review-queue")
    page.goto(f"{page.base_url}/w/team-a/specs/restart-packages/{package.pk}/")
    expect(page.get_by_role("heading", name="Starting instruction")).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("link", name="Download Markdown").click()
    assert download.value.suggested_filename == f"restart-package-{package.pk}.md"
    screenshot("specs-package")
    page.goto(f"{page.base_url}/w/team-a/specs/restart-packages/new/?spec_version={v1.pk}")
    page.get_by_role("button", name="Add a verification").click()
    expect(page.locator("#verifications > [data-row]")).to_have_count(2)
    screenshot("specs-package-builder")


def test_divergence_source_opens_the_viewer_at_the_call(
    page, login, workspace, members, screenshot
):
    from tests.specs.test_divergence_source import mark_in

    mark = mark_in(workspace, members["editor"], 33)
    _spec, v1 = _authoritative_with_divergence(workspace, members, mark)
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/specs/versions/{v1.pk}/")
    link = page.get_by_role("link", name=f"Forgotten constraint at call {mark.call_index}")
    expect(link).to_be_visible()
    screenshot("spec-version-divergence-source")
    link.click()
    page.wait_for_load_state("networkidle")
    assert f"?at={mark.call_index}" in page.url
    expect(page.locator(f"#step-{mark.call_index}")).to_be_visible()
    expect(page.get_by_text(f"trace-divergence:{mark.pk}")).to_be_visible()
    # A viewer may not build restart packages, so the panel that links the builder is absent.
    expect(page.get_by_text("The run diverged (forgotten constraint)")).to_have_count(0)
    screenshot("viewer-from-spec-source", full_page=False)
    # The session page leads into the same viewer.
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/sessions/{mark.session_id}/")
    page.get_by_role("link", name="Read and annotate the steps").click()
    page.wait_for_load_state("networkidle")
    assert f"/annotations/sessions/{mark.session_id}/" in page.url
    screenshot("session-to-viewer", full_page=False)


def _authoritative_with_divergence(workspace, members, mark):
    spec = services.spec_create(
        workspace=workspace, actor=members["editor"], title="Retention", slug="retention",
        consequence="low",
    )  # fmt: skip
    version = services.spec_version_create(
        spec=spec,
        author=members["editor"],
        supersedes=None,
        items=BASE_ITEMS,
        sources=[services.SourceInput("divergence", divergence=mark, label="why v1")],
    )
    return spec, version


def test_the_diff_keeps_the_spaces_between_changed_words(page, login, in_review, screenshot):
    _spec, _v1, v2 = in_review
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/team-a/specs/versions/{v2.pk}/diff/")
    row = page.locator("tr").filter(has=page.locator(".diff-after", has_text="S3-compatible store"))
    before = row.locator(".diff-before .diff-text")
    after = row.locator(".diff-after .diff-text")
    # What a reviewer reads is each side's own sentence, word for word.
    assert before.inner_text() == "Where does raw tool output live?"
    assert after.inner_text() == "Raw tool output lives in the S3-compatible store."
    assert before.locator("del").count() >= 1 and after.locator("ins").count() >= 1
    screenshot("specs-diff-words")


def test_reviewer_must_acknowledge_a_dropped_settled_item(
    page, login, authoritative, members, screenshot
):
    spec, v1 = authoritative()
    v2 = services.spec_version_create(
        spec=spec,
        author=members["editor"],
        supersedes=v1,
        items=[item for item in resolved(BASE_ITEMS) if item.key != "retention"],
        note="Settles storage; retention moves to the storage spec.",
    )
    services.spec_version_submit(version=v2, actor=members["editor"])
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/team-a/specs/versions/{v2.pk}/")
    review = page.locator("#review")
    expect(
        review.get_by_text("This version resolves 1 open question and drops 1 settled item.")
    ).to_be_visible()
    expect(review.get_by_text("Settled constraint in v1")).to_be_visible()
    expect(review.get_by_text("Raw uploads are kept for 30 days.")).to_be_visible()
    approve = review.get_by_role("button", name="Approve v2 and supersede v1")
    review.get_by_label(re.compile("I acknowledge that v2 resolves storage")).check()
    expect(review.get_by_text("Acknowledged 1 of 2 items")).to_be_visible()
    expect(approve).to_be_disabled()
    screenshot("specs-review-dropped-settled-item")
    review.get_by_label(re.compile("I acknowledge that v2 drops the settled retention")).check()
    expect(approve).to_be_enabled()
    approve.click()
    page.wait_for_url(f"**/specs/versions/{v2.pk}/")
    expect(page.locator("h1 .badge.status-authoritative")).to_have_text("authoritative")
    v2.refresh_from_db()
    assert v2.acknowledged_resolutions == ["storage", "retention"]
