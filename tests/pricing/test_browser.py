"""An editor loads the list prices in Chromium, reads a session's cost and its source, and
prices a model the table lacked from the session page's "no price" link."""

import pytest

from tests.pricing.conftest import ingest_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CALLS = (
    ("m1", "claude-sonnet-4-5-20250929", 1200, 3000, 40_000, 800),  # $0.03885
    ("m2", "claude-sonnet-4-5-20250929", 300, 500, 44_000, 1500),  # $0.038475
    ("m3", "my-local-model", 1_000_000, 0, 0, 100_000),
)


def test_load_prices_read_a_session_cost_and_price_a_missing_model(
    page, login, members, workspace, screenshot
):
    session = ingest_calls(workspace, CALLS)
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/sessions/{session.pk}/")
    cost = page.locator("#session-cost")
    assert cost.get_by_test_id("no-price").inner_text() == "no price"
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Prices").click()
    assert page.get_by_text("No price table yet").is_visible()
    screenshot("prices-empty")
    page.get_by_role("button", name="Load list prices as v1").click()
    page.wait_for_load_state("load")
    row = page.get_by_test_id("prices").get_by_role("row").filter(has_text="claude-opus-4-5")
    assert row.locator("td").nth(2).inner_text() == "$5.00"
    assert row.locator("td").nth(3).inner_text() == "$25.00"
    screenshot("prices-v1")

    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/sessions/{session.pk}/")
    assert cost.get_by_test_id("cost").inner_text() == "$0.0773"  # 0.03885 + 0.038475
    assert "no price for 1 call" in cost.inner_text()
    assert cost.get_by_role("link", name="price table v1").is_visible()
    screenshot("session-cost", full_page=False)

    cost.get_by_role("link", name="add my-local-model").click()
    page.wait_for_load_state("load")
    assert page.locator("#id_model").input_value() == "my-local-model"
    for field, value in [
        ("input", "1"), ("output", "10"), ("cache_read", "0.1"), ("cache_write_5m", "1.25"),
        ("cache_write_1h", "2"), ("source", "our own hosting cost"),
    ]:  # fmt: skip
        page.locator(f"#id_{field}").fill(value)
    page.get_by_role("button", name="Save as v2").click()
    page.wait_for_load_state("load")
    assert page.get_by_test_id("versions").get_by_role("row").nth(1).inner_text().startswith("v2")

    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/sessions/{session.pk}/")
    # + 1M input at $1 + 100k output at $10 = $2 for the local model
    assert cost.get_by_test_id("cost").inner_text() == "$2.08"
    assert "no price" not in cost.inner_text()
    cost.get_by_role("link", name="price table v2").click()
    page.wait_for_load_state("load")
    assert page.get_by_role("heading", name="Prices v2").is_visible()
    assert page.get_by_text("added my-local-model").is_visible()
