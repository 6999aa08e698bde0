"""People read artifacts in Chromium: list, tail, highlighted and escaped search, ranges."""

import io

import pytest

from artifacts import demo
from artifacts.models import Artifact

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = b'<script>window.pwned = 1</script> <img src=x onerror="window.pwned=2"> FAILED\n'


def test_empty_list_says_what_to_do_next(page, login, members, workspace, screenshot):
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/artifacts/")
    assert page.get_by_text("No artifacts yet").is_visible()
    curl = page.locator("pre.art-curl").inner_text()
    assert "curl -X POST" in curl and "/api/v1/artifacts/" in curl and "X-Run-Id" in curl
    screenshot("artifacts-empty")


def test_search_highlights_escaped_matches(page, login, members, workspace, store, screenshot):
    demo.seed(workspace=workspace, users=members, stdout=io.StringIO())
    body = b"".join(b"step %d ok\n" % i for i in range(1, 301)) + HOSTILE + b"done\n"
    artifact = store(body, run_id="run-x", tool_call_id="call-9", command="./build.sh <all>")
    login("editor-a")

    page.goto(f"{page.base_url}/w/{workspace.slug}/artifacts/")
    rows = page.locator("table.art-table tbody tr")
    assert rows.count() == Artifact.objects.filter(workspace=workspace).count()
    screenshot("artifacts-list")
    page.get_by_label("Status").select_option("truncated")
    page.wait_for_url("**status=truncated**")
    page.wait_for_load_state("networkidle")
    assert page.locator("table.art-table tbody tr").count() == 1
    assert "rg -n" in page.locator("table.art-table tbody").inner_text()

    page.goto(f"{page.base_url}/w/{workspace.slug}/artifacts/{artifact.pk}/")
    assert page.get_by_role("heading", name="Cost before loading").is_visible()
    assert "estimated" in page.locator(".art-stats").inner_text().lower()
    tail = page.locator(".art-lines").inner_text()
    assert "done" in tail and "step 300 ok" in tail
    screenshot("artifact-tail")

    page.get_by_role("link", name="Search").click()
    page.get_by_label("Search", exact=True).fill("<script>")
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector(".art-lines mark")
    marks = page.locator(".art-lines mark")
    assert marks.count() == 1
    assert marks.first.inner_text() == "<script>"
    line = page.locator(".art-lines tr", has=page.locator("mark"))
    assert line.locator("th").inner_text() == "301"
    assert page.evaluate("window.pwned") is None
    # The read log updated in the same swap.
    assert "search" in page.locator("#readlog table").inner_text()
    screenshot("artifact-search")

    # Regex search, no JavaScript needed: the form works as a plain GET too.
    page.goto(
        f"{page.base_url}/w/{workspace.slug}/artifacts/{artifact.pk}/"
        "?view=search&q=step+(29%5Cd)+ok&regex=1&context=0"
    )
    assert page.locator(".art-lines mark").count() == 10
    assert page.evaluate("window.pwned") is None

    page.get_by_role("link", name="Line range").click()
    page.get_by_label("From line").fill("299")
    page.get_by_label("To line").fill("302")
    page.get_by_role("button", name="Show lines").click()
    page.wait_for_selector("text=Lines 299–302")
    numbers = page.locator(".art-ln").all_inner_texts()
    assert numbers == ["299", "300", "301", "302"]
    screenshot("artifact-range")


def test_tombstone_page_and_delete(page, login, members, workspace, store, screenshot):
    artifact = store(b"secret-ish env\n", run_id="run-d", command="env")
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/artifacts/{artifact.pk}/")
    page.get_by_label("Reason (kept on the tombstone)").fill("not needed")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete content").click()
    page.wait_for_selector(".art-tombstone")
    assert "not needed" in page.locator(".art-tombstone").inner_text()
    assert page.locator(".art-viewer").count() == 0
    screenshot("artifact-tombstone")


def test_settings_page(page, login, members, workspace, screenshot):
    login("admin-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/artifacts/settings/")
    page.get_by_label("Retention days").fill("7")
    page.get_by_label("Custom redaction rules").fill("ticket: TICKET-[0-9]+")
    page.get_by_role("button", name="Save settings").click()
    assert "bound every repetition" in page.locator(".field.has-error .error").inner_text()
    screenshot("artifact-settings-error")
    page.get_by_label("Custom redaction rules").fill("ticket: TICKET-[0-9]{1,12}")
    page.get_by_role("button", name="Save settings").click()
    assert page.get_by_text("Artifact settings saved.").is_visible()
    screenshot("artifact-settings")
