"""The instruction-visibility page in Chromium: the empty state, a free-text instruction
counted on the planted corpus (headline values, the chart with its bands, the tables), a
ledger instruction picked from the form, and the refusal of both at once."""

import pytest

from qualification.contextfiles.services import context_file_import
from tests.analytics.planted_instruction_visibility import INSTRUCTION, LEDGER_TEXT, sessions
from traces.services import ingest_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_instruction_visibility_page(page, login, members, workspace, screenshot):
    for name, data in sessions().items():
        ingest_bytes(
            workspace=workspace,
            name=f"{name}.jsonl",
            data=data,
            source="demo",
            refresh_analytics=False,
        )
    context_file_import(
        workspace=workspace,
        repository="acme/shop",
        path="AGENTS.md",
        revision="r1",
        text=LEDGER_TEXT,
        actor=members["editor"],
    )
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/")
    page.get_by_role("link", name="Instruction visibility").click()
    assert "Choose an instruction to look for" in page.locator(".empty-state").inner_text()
    caveat = page.locator("#iv-caveat").inner_text()
    assert (
        "Absence from visible reasoning does not prove that the instruction had no influence."
        in caveat
    )

    page.get_by_label("Instruction (free text)").fill(INSTRUCTION)
    page.get_by_role("button", name="Count").click()
    page.locator("#iv-chart.js-plotly-plot").wait_for()
    assert page.locator("#iv-instruction").inner_text() == INSTRUCTION
    exact = page.locator("#iv-exact").inner_text()
    assert "5.3%" in exact and "1 of n = 19" in exact and "[" in exact
    normalised = page.locator("#iv-normalised").inner_text()
    assert "15.8%" in normalised and "[5.5%, 37.6%]" in normalised and "3 of n = 19" in normalised
    assert (
        "5 calls in the window without visible thinking"
        in page.locator("#iv-not-counted").inner_text()
    )
    assert "Method: 95% Wilson interval" in page.locator("#iv-result").inner_text()
    names = page.evaluate("document.getElementById('iv-chart').data.map(t => t.name)")
    assert names == [
        "normalised match: 95% Wilson band",
        "normalised match",
        "exact match: 95% Wilson band",
        "exact match",
    ]
    assert page.evaluate("document.getElementById('iv-chart').data[0].fill") == "toself"
    row = page.locator("#iv-turns tbody tr").nth(3)  # turns 10–19
    assert row.locator("th").inner_text() == "10–19"
    assert "0 of n = 6" in row.inner_text() and row.locator("td.num").inner_text() == "4"
    session = page.locator("#iv-session-table tbody tr")
    assert session.count() == 1 and "3 of n = 19" in session.inner_text()
    screenshot("instruction-visibility")

    page.get_by_label("Instruction (free text)").fill("")
    page.get_by_label("or an instruction from the ledger").select_option(index=1)
    page.get_by_role("button", name="Count").click()
    page.locator("#iv-chart.js-plotly-plot").wait_for()
    assert "acme/shop:AGENTS.md line" in page.locator("#iv-result h2").inner_text()
    assert "3 of n = 27" in page.locator("#iv-exact").inner_text()
    assert "5 of n = 27" in page.locator("#iv-normalised").inner_text()

    page.get_by_label("Instruction (free text)").fill(INSTRUCTION)
    page.get_by_role("button", name="Count").click()
    page.wait_for_load_state("networkidle")
    assert "not both" in page.locator("#iv-form").inner_text()
    assert page.locator("#iv-result").count() == 0
