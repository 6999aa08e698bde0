"""Chromium: a person edits the instruction ledger inline and reads an evaluation."""

import pytest

from qualification.contextfiles import services
from qualification.contextfiles.models import Instruction
from tests.contextfiles.conftest import AGENTS_MD, REGISTRATION, table_tasks, trials_csv

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def seeded(workspace, members):
    result = services.context_file_import(
        workspace=workspace,
        repository="acme/shop",
        path="AGENTS.md",
        revision="c0ffee1",
        text=AGENTS_MD,
        actor=members["editor"],
    )
    evaluation = services.evaluation_register(
        context_file=result.context_file,
        actor=members["editor"],
        data=REGISTRATION
        | {"ablations": [{"name": "rules-only", "categories": ["failure_prevention"]}]},
    )
    services.trials_record(
        evaluation=evaluation,
        data=trials_csv(table_tasks(60, 25, 3, 12), arms=("full", "rules-only")),
        actor=members["editor"],
    )
    return result, evaluation


def test_editing_the_ledger_inline(page, login, seeded, workspace, screenshot):
    result, _ = seeded
    instruction = result.revision.instructions.get(position=2)
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/context-files/{result.context_file.pk}/")
    page.wait_for_load_state("networkidle")
    summary = page.locator("#flag-summary")
    assert "15" in summary.inner_text()  # 15 of 15 flagged before any edit
    screenshot("file-page")
    row = page.locator(f"#ledger-{instruction.pk}")
    row.get_by_role("link", name="Edit").click()
    form_row = page.locator(f"#ledger-{instruction.pk}.cf-editing")
    form_row.wait_for()
    assert page.url.endswith(
        f"/context-files/{result.context_file.pk}/"
    )  # no navigation: htmx swap
    assert page.evaluate("document.activeElement.id") == "id_category"
    # An invalid date order is refused inline, keeping what was typed.
    form_row.get_by_label("Owner").fill("platform")
    form_row.get_by_label("Last reviewed on").fill("2026-05-01")
    form_row.get_by_label("Review due on").fill("2026-01-01")
    form_row.get_by_role("button", name="Save").click()
    page.locator(f"#ledger-{instruction.pk} .error").wait_for()
    assert "cannot be before the last one" in page.locator(f"#ledger-{instruction.pk}").inner_text()
    assert (
        page.locator(f"#ledger-{instruction.pk}").get_by_label("Owner").input_value() == "platform"
    )
    screenshot("ledger-inline-error")
    form_row = page.locator(f"#ledger-{instruction.pk}")
    form_row.get_by_label("Review due on").fill("2027-01-01")
    form_row.get_by_label("Reason").fill("Agents skipped the contract tests <twice>")
    form_row.get_by_label("Failure or outcome it affects").fill("red main after merge")
    form_row.get_by_role("button", name="Save").click()
    page.locator(f"#ledger-{instruction.pk}:not(.cf-editing)").wait_for()
    saved = page.locator(f"#ledger-{instruction.pk}")
    assert "platform" in saved.inner_text() and "<twice>" in saved.inner_text()
    assert "ok" in saved.locator(".badge").all_inner_texts()
    # The flagged counter refreshes through the ledgerChanged event.
    page.wait_for_function("() => document.querySelector('#flag-summary').innerText.includes('14')")
    screenshot("ledger-saved")
    stored = Instruction.objects.get(pk=instruction.pk)
    assert (stored.owner, str(stored.review_due_on)) == ("platform", "2027-01-01")
    # Escape closes an open editor without saving.
    other = result.revision.instructions.get(position=3)
    page.locator(f"#ledger-{other.pk}").get_by_role("link", name="Edit").click()
    page.locator(f"#ledger-{other.pk}.cf-editing").wait_for()
    page.locator(f"#ledger-{other.pk}").get_by_label("Owner").fill("nobody")
    page.keyboard.press("Escape")
    page.locator(f"#ledger-{other.pk}:not(.cf-editing)").wait_for()
    assert Instruction.objects.get(pk=other.pk).owner == ""


def test_evaluation_page_draws_the_forest_plot(page, login, seeded, workspace, screenshot):
    _, evaluation = seeded
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/context-files/evaluations/{evaluation.pk}/")
    page.locator("#forest .main-svg").first.wait_for()
    assert page.locator("#forest .point").count() >= 2
    verdict = page.locator(".cf-verdict-badge").inner_text().lower()
    assert verdict == "helps"
    assert "Registration locked" in page.locator(".cf-meta").inner_text()
    screenshot("evaluation-page")
    page.goto(
        f"{page.base_url}/w/{workspace.slug}/context-files/calculator/?both=59&with_only=6&without_only=16&neither=80&delta_pp=5&margin_pp=10"
    )
    assert page.locator(".cf-verdict-badge").inner_text().lower() == "hurts"
    screenshot("calculator")


def test_pages_work_without_javascript(browser, live_server, seeded, workspace):
    context = browser.new_context(
        java_script_enabled=False, viewport={"width": 1300, "height": 900}
    )
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("editor-a")
    page.get_by_label("Password").fill("correct-horse-battery-staple")
    page.get_by_role("button", name="Sign in").click()
    result, _ = seeded
    instruction = result.revision.instructions.get(position=4)
    page.goto(f"{live_server.url}/w/{workspace.slug}/context-files/{result.context_file.pk}/")
    page.locator(f"#ledger-{instruction.pk}").get_by_role("link", name="Edit").click()
    page.wait_for_url("**?edit=1")
    page.get_by_label("Owner").fill("build-team")
    page.get_by_role("button", name="Save the ledger entry").click()
    page.wait_for_url(f"**/context-files/{result.context_file.pk}/#ledger-{instruction.pk}")
    assert "Saved the ledger entry" in page.locator(".messages").inner_text()
    assert "build-team" in page.locator(f"#ledger-{instruction.pk}").inner_text()
    context.close()
