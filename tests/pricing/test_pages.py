"""Price table pages and cost beside tokens on the session pages (server-rendered HTML)."""

import re
from decimal import Decimal

import pytest

import numfmt
from governance.models import AuditEvent
from tests.pricing.conftest import ingest_calls
from traces.pricing import services
from traces.pricing.models import PriceTableVersion

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def test_the_empty_price_table_says_what_to_do(workspace, client_for):
    page = text(client_for("editor").get(f"/w/{workspace.slug}/prices/"))
    assert "No price table yet" in page and "Load list prices as v1" in page
    viewer = text(client_for("viewer").get(f"/w/{workspace.slug}/prices/"))
    assert "No price table yet" in viewer and "Load list prices" not in viewer


def test_an_editor_loads_the_list_prices_and_edits_one(workspace, client_for, members):
    client = client_for("editor")
    base = f"/w/{workspace.slug}/prices/"
    assert client.post(base + "load-list-prices/").status_code == 302
    page = text(client.get(base))
    assert "v1" in page and "claude-sonnet-4-5" in page and "2025-11-30" in page
    assert "$3.00 $15.00 $0.30 $3.75 $6.00" in page  # sonnet 4.5: in, out, read, 5 min, 1 h
    form = client.get(base + "edit/?edit=claude-sonnet-4-5").content.decode()
    assert 'value="3.75"' in form and "Save as v2" in form
    response = client.post(
        base + "edit/?edit=claude-sonnet-4-5",
        {
            "model": "claude-sonnet-4-5", "aliases": "claude-sonnet-4.5", "input": "2.5",
            "output": "15", "cache_read": "0.25", "cache_write_5m": "3.125",
            "cache_write_1h": "5", "as_of": "2026-12-01", "source": "our contract",
            "note": "negotiated rate",
        },
    )  # fmt: skip
    assert response.status_code == 302
    page = text(client.get(base))
    assert "v2" in page and "$2.50" in page and "our contract" in page
    assert "changed claude-sonnet-4-5" in page and "negotiated rate" in page
    old = text(client.get(base + "v1/"))
    assert "An old version" in old and "$3.00 $15.00" in old
    assert AuditEvent.objects.filter(action="price_table.version_create").count() == 2


def test_a_bad_rate_is_shown_on_the_form(workspace, client_for):
    client = client_for("editor")
    response = client.post(
        f"/w/{workspace.slug}/prices/edit/",
        {"model": "x", "input": "-1", "output": "1", "cache_read": "1", "cache_write_5m": "1",
         "cache_write_1h": "1", "as_of": "2026-01-01", "source": "s"},
    )  # fmt: skip
    assert response.status_code == 400
    assert "greater than or equal to 0" in response.content.decode()
    assert not PriceTableVersion.objects.exists()


def test_viewers_cannot_edit_and_other_workspaces_are_not_found(
    workspace, other_workspace, client_for, outsider
):
    services.price_table_load_list_prices(workspace=other_workspace, user=outsider)
    viewer = client_for("viewer")
    assert viewer.get(f"/w/{workspace.slug}/prices/edit/").status_code == 403
    assert viewer.post(f"/w/{workspace.slug}/prices/load-list-prices/").status_code == 403
    assert viewer.get(f"/w/{workspace.slug}/prices/v1/").status_code == 404  # v1 is team-b's
    assert viewer.get(f"/w/{other_workspace.slug}/prices/").status_code == 404


def test_session_pages_show_cost_beside_tokens_with_its_source(
    workspace, members, client_for, run_on_commit
):
    with run_on_commit():
        session = ingest_calls(workspace, CALLS_WITH_UNKNOWN)
    client = client_for("viewer")
    detail = f"/w/{workspace.slug}/traces/sessions/{session.pk}/"
    before = client.get(detail).content.decode()
    assert 'data-testid="no-price"' in before and "$0.00" not in before
    assert "/prices/edit/?model=claude-sonnet-4-5-20250929" in before
    services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    html = client.get(detail).content.decode()
    cost = re.search(r'id="session-cost">(.*?)</dd>', html, re.S).group(1)
    # 0.03885 + 0.038475 + 0.00195 priced; the local model's call is not, and says so
    assert '<span data-testid="cost">$0.0793</span>' in cost
    assert "no price for 1 call" in cost and "add my-local-model" in cost
    assert f'href="/w/{workspace.slug}/prices/v1/">price table v1</a>' in cost
    assert ">$0.0389<" in html and ">$0.00195<" in html  # per call, in the calls table
    agent = re.search(r'data-testid="agent-cost">(.*?)</td>', html, re.S).group(1)
    assert '<span data-testid="cost">$0.0793</span>' in agent  # the one (main) agent
    listing = client.get(f"/w/{workspace.slug}/traces/").content.decode()
    assert '<span data-testid="cost">$0.0793</span>' in listing


CALLS_WITH_UNKNOWN = (
    ("m1", "claude-sonnet-4-5-20250929", 1200, 3000, 40_000, 800),
    ("m2", "claude-sonnet-4-5-20250929", 300, 500, 44_000, 1500),
    ("m3", "claude-haiku-4-5-20251001", 50, 0, 9000, 200),
    ("m4", "my-local-model", 10, 0, 0, 10),
)


def test_the_analytics_cost_page_prices_the_tokens_by_model(
    workspace, members, client_for, run_on_commit
):
    with run_on_commit():
        ingest_calls(workspace, CALLS_WITH_UNKNOWN, analytics=True)
    client = client_for("viewer")
    url = f"/w/{workspace.slug}/analytics/"
    before = client.get(url).content.decode()
    panel = before.split('id="dollar-cost"')[1].split("</section>")[0]
    assert "no price" in panel and "$0.00" not in panel and "for 0 of 4 calls" in panel
    # A new price table applies at once, without computing the analytics again.
    services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    panel = client.get(url).content.decode().split('id="dollar-cost"')[1].split("</section>")[0]
    assert '<span data-testid="cost">$0.0793</span>' in panel and "for 3 of 4 calls" in panel
    by_model = panel.split('data-testid="cost-by-model"')[1].split("</table>")[0]
    rows = re.findall(r"<tr>\s*<td[^>]*>([^<]+)</td>.*?</tr>", by_model, re.S)
    assert rows == ["claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001", "my-local-model"]
    assert ">$0.0773<" in panel and ">$0.00195<" in panel  # sonnet 0.077325, haiku
    assert "n = 4 deduplicated calls" in panel


def test_incidents_and_what_if_show_dollars_beside_tokens(
    workspace, members, client_for, run_on_commit
):
    with run_on_commit():
        ingest_calls(workspace, CALLS_WITH_UNKNOWN, analytics=True)
    services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    client = client_for("viewer")
    incidents = client.get(f"/w/{workspace.slug}/analytics/incidents/").content.decode()
    cost = incidents.split('id="incidents-cost">')[1].split("</p>")[0]
    assert '<span data-testid="cost">$0.0793</span>' in cost and "price table v1" in cost
    what_if = client.get(f"/w/{workspace.slug}/analytics/what-if/").content.decode()
    line = re.sub(r"<[^>]+>", "", what_if.split('data-testid="what-if-cost">')[1].split("</p>")[0])
    # blended rate: $0.079275 over the priced calls' tokens billed
    billed = (1200 + 3000 + 40_000 + 800) + (300 + 500 + 44_000 + 1500) + (50 + 9000 + 200)
    rate = Decimal("0.079275") * 10**6 / billed
    assert f"blended rate of {numfmt.usd(rate)} per million tokens billed" in line
    step_tokens = float(
        re.search(r"at ([\d.]+k) tokens per productive step", what_if).group(1)[:-1]
    )
    assert "per productive step at the optimum" in line and "price table v1" in line
    shown = Decimal(re.search(r"about \$([\d.]+) per productive step", line).group(1))
    assert abs(shown - Decimal(step_tokens * 1000) * rate / 10**6) / shown < Decimal("0.01")


def test_the_cost_page_splits_dollars_by_agent_type_with_forks_marked(
    workspace, members, client_for, run_on_commit
):
    from traces.models import Agent, AgentKind, Call, StartKind
    from traces.pricing.analysis.list_prices import LIST_PRICES
    from traces.services import ingest_bytes
    from traces.synthetic import CorpusParams, generate_corpus

    params = CorpusParams(
        sessions=2, seed=9, steps_per_session=(20, 30), subagents_per_session=(2, 2)
    )
    with run_on_commit():
        for generated in generate_corpus(params):
            ingest_bytes(
                workspace=workspace, name=f"{generated.session_id}.jsonl",
                data=b"\n".join(generated.lines) + b"\n", source="demo",
            )  # fmt: skip
    services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    html = client_for("viewer").get(f"/w/{workspace.slug}/analytics/").content.decode()
    table = html.split('data-testid="cost-by-agent-type"')[1].split("</table>")[0]
    rates = {p["model"]: p for p in LIST_PRICES}

    def cost_of(calls) -> Decimal:
        total = Decimal(0)
        for c in calls:
            r = rates[c.model.lower()]
            total += (c.input_tokens * r["input"] + c.output_tokens * r["output"]
                      + c.cache_read_tokens * r["cache_read"]
                      + c.cache_creation_tokens * r["cache_write_5m"]) / 10**6  # fmt: skip
        return total

    rows = [
        (re.sub(r"<[^>]+>", "", m.group(1)).strip(), m.group(0))
        for m in re.finditer(r"<tr>\s*<td>(.*?)</td>.*?</tr>", table, re.S)
    ]
    main = Call.objects.filter(workspace=workspace, agent__kind=AgentKind.MAIN)
    assert rows and dict(rows)["main"].count(f">{numfmt.usd(cost_of(main))}<") == 1
    groups = set(
        Agent.objects.filter(workspace=workspace, kind=AgentKind.SUBAGENT).values_list(
            "agent_type", "start_kind"
        )
    )
    assert groups and len(rows) == 1 + len(groups)
    for agent_type, start_kind in groups:
        calls = Call.objects.filter(
            workspace=workspace, agent__agent_type=agent_type, agent__start_kind=start_kind,
            agent__kind=AgentKind.SUBAGENT,
        )  # fmt: skip
        label = agent_type or "subagent (no type)"
        shown = [
            html
            for name, html in rows
            if name == label and f">{numfmt.usd(cost_of(calls))}<" in html
        ]
        assert len(shown) >= 1, (label, start_kind)
        assert ('status-failed">fork<' in shown[0]) == (start_kind == StartKind.FORK)
    assert "agent-type-cost" in html  # the chart
