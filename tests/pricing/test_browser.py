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


def test_cost_by_agent_and_the_telemetry_split_in_chromium(
    page, login, members, workspace, screenshot, client
):
    """Telemetry costs two of a session's calls; the session page says the split and the
    cost-by-agent page shows the forked subagent marked, at 1280 and 1920 px."""
    import json
    from decimal import Decimal

    import numfmt
    from governance.services import api_token_create
    from tests.pricing.test_telemetry_cost import event, ingest, subagent_transcript, table_cost
    from tests.traces.test_otlp_telemetry import logs
    from traces.models import Agent, Session
    from traces.pricing import services

    services.price_table_load_list_prices(workspace=workspace, user=None)
    session_id = "sess-telemetry-cost"
    ingest(workspace, subagent_transcript(session_id))
    Agent.objects.filter(workspace=workspace, external_id="a2").update(
        start_kind="fork", agent_type="reviewer"
    )
    token = api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext
    body = logs([
        event("main1", 0.5, 0, session=session_id, query_source="repl_main_thread"),
        event("a1-c", 0.25, 1, session=session_id, query_source="agent:custom",
              **{"agent.name": "explorer"}),
    ])  # fmt: skip
    response = client.post(
        "/v1/logs", data=json.dumps(body).encode(), content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )  # fmt: skip
    assert response.status_code == 200
    session = Session.objects.get(workspace=workspace, external_id=session_id)
    total = Decimal("0.75") + table_cost(100, 0)

    login("viewer-a")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{page.base_url}/w/{workspace.slug}/traces/sessions/{session.pk}/")
    cost = page.locator("#session-cost")
    assert cost.get_by_test_id("cost").inner_text() == numfmt.usd(total)
    share = f"{float(Decimal('0.75') / total) * 100:.1f}%"
    assert (
        cost.get_by_test_id("cost-source")
        .inner_text()
        .startswith(f"{share} from telemetry (2 calls), ")
    )
    assert cost.get_by_role("link", name="price table v1").is_visible()
    screenshot("session-cost-split-1280", full_page=False)

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Cost by agent").click()
    page.wait_for_load_state("load")
    table = page.get_by_test_id("subagent-cost")
    first = table.get_by_role("row").nth(1)
    assert first.locator("td").nth(0).inner_text() == "repl_main_thread"
    assert first.get_by_test_id("row-cost").inner_text() == numfmt.usd(0.5)
    fork = table.get_by_role("row").filter(has_text="reviewer")
    assert fork.get_by_test_id("fork").inner_text() == "fork"
    assert page.locator("#subagent-cost .main-svg").first.is_visible()
    no_overflow = "document.documentElement.scrollWidth <= window.innerWidth"
    assert page.evaluate(no_overflow)
    screenshot("cost-by-agent-1280")
    page.set_viewport_size({"width": 1920, "height": 1000})
    page.reload()
    assert page.evaluate(no_overflow)
    screenshot("cost-by-agent-1920")
