"""Cost from telemetry and from the price table, joined per call: the api_request event's
cost_usd wins in both arrival orders, 1-hour cache writes take the 1-hour rate, the split is
reported, and cost by query source and agent name (page and API)."""

import json
import re
from decimal import Decimal

import pytest

from governance.services import api_token_create
from tests.traces.factories import claude_assistant, claude_user
from tests.traces.test_otlp_telemetry import attributes, logs, record
from traces.models import Agent, Call, Session, TelemetryEvent
from traces.pricing import selectors, services
from traces.services import ingest_bytes

pytestmark = pytest.mark.django_db

SESSION = "sess-telemetry-cost"
# (message id, 5-minute writes, 1-hour writes) of the main thread's calls
CALLS = (("m1", 1000, 0), ("m2", 200, 3000), ("m3", 0, 500), ("m4", 700, 700))
SONNET = {  # the list prices the table is loaded with, $ per million tokens
    "input": Decimal("3"), "output": Decimal("15"), "cache_read": Decimal("0.30"),
    "cache_write_5m": Decimal("3.75"), "cache_write_1h": Decimal("6"),
}  # fmt: skip


def assistant(msg, five, hour, t, *, session=SESSION, **extra):
    line = json.loads(
        claude_assistant(msg, f"req-{msg}", t=t, inp=10, cc=five + hour, cr=20_000, out=300,
                         session=session, **extra)
    )  # fmt: skip
    line["message"]["usage"]["cache_creation"] = {
        "ephemeral_5m_input_tokens": five,
        "ephemeral_1h_input_tokens": hour,
    }
    return json.dumps(line)


def ingest(workspace, lines, name="t.jsonl"):
    ingest_bytes(
        workspace=workspace, name=name, data=("\n".join(lines) + "\n").encode(), source="demo"
    )


@pytest.fixture
def send(client, workspace, members):
    token = api_token_create(workspace=workspace, user=members["editor"], name="otel").plaintext

    def post(records):
        response = client.post(
            "/v1/logs",
            data=json.dumps(logs(records)).encode(),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        assert response.status_code == 200 and response.json() == {}, response.content
        return response

    return post


def event(msg, cost, offset, *, session=SESSION, **extra):
    attrs = {"session.id": session, "event.name": "api_request", "model": "claude-sonnet-4-5",
             "input_tokens": 10, "output_tokens": 300, "cache_read_tokens": 20_000,
             "cache_creation_tokens": 1000, "cost_usd": cost, "request_id": f"req-{msg}",
             **extra}  # fmt: skip
    return record("claude_code.api_request", offset, **attrs)


def table_cost(five, hour):
    """The reference: one call's dollars at SONNET, from its token counts."""
    r = SONNET
    dollars = (
        10 * r["input"] + 300 * r["output"] + 20_000 * r["cache_read"]
        + five * r["cache_write_5m"] + hour * r["cache_write_1h"]
    )  # fmt: skip
    return dollars / Decimal(1_000_000)


@pytest.fixture
def priced(workspace):
    return services.price_table_load_list_prices(workspace=workspace, user=None)


def test_the_1h_writes_are_stored_and_priced_at_the_1h_rate(workspace, priced):
    ingest(workspace, [assistant(m, five, hour, t=i) for i, (m, five, hour) in enumerate(CALLS)])
    stored = {c.key.split(":")[0]: c for c in Call.objects.filter(workspace=workspace)}
    assert {
        m: (c.cache_creation_tokens, c.cache_creation_1h_tokens) for m, c in stored.items()
    } == {m: (five + hour, hour) for m, five, hour in CALLS}
    session = Session.objects.get(workspace=workspace, external_id=SESSION)
    cost = selectors.session_cost(session=session)
    assert cost.usd == sum(table_cost(five, hour) for _, five, hour in CALLS)
    assert cost.table_calls == 4 and cost.telemetry_calls == 0
    assert (
        cost.split_text
        == f"100.0% from price table v{priced.number} ({priced.created_at.date()}) (4 calls)"
    )


@pytest.mark.parametrize("order", ["transcript first", "events first"])
def test_telemetry_cost_wins_per_call_in_either_order(workspace, priced, send, order):
    lines = [assistant(m, five, hour, t=i) for i, (m, five, hour) in enumerate(CALLS)]
    costs = {"m1": 0.5, "m3": 0.25}  # two of the four calls carry the harness's cost
    events = [event(m, c, i) for i, (m, c) in enumerate(costs.items())]
    if order == "transcript first":
        ingest(workspace, lines)
        send(events)
    else:
        send(events)
        ingest(workspace, lines)
    calls = {c.key.split(":")[0]: c for c in Call.objects.filter(workspace=workspace)}
    assert len(calls) == 4  # the events add no call
    assert {m: c.cost_usd for m, c in calls.items()} == {
        "m1": Decimal("0.5"),
        "m2": None,
        "m3": Decimal("0.25"),
        "m4": None,
    }
    linked = dict(TelemetryEvent.objects.values_list("request_id", "call_id"))
    assert linked == {"req-m1": calls["m1"].pk, "req-m3": calls["m3"].pk}
    session = Session.objects.get(workspace=workspace, external_id=SESSION)
    cost = selectors.session_cost(session=session)
    table_part = table_cost(200, 3000) + table_cost(700, 700)
    assert cost.telemetry_usd == Decimal("0.75") and cost.table_usd == table_part
    assert cost.usd == Decimal("0.75") + table_part
    assert (cost.telemetry_calls, cost.table_calls, cost.calls) == (2, 2, 4)
    share = f"{float(Decimal('0.75') / cost.usd) * 100:.1f}%"
    assert cost.split_text.startswith(f"{share} from telemetry (2 calls), ")
    assert f"from price table v{priced.number}" in cost.split_text


def test_a_resent_event_changes_nothing_and_a_new_cost_replaces_none(workspace, priced, send):
    ingest(workspace, [assistant("m1", 100, 0, t=0)])
    send([event("m1", 0.5, 0)])
    send([event("m1", 0.5, 0)])  # the same record again
    assert TelemetryEvent.objects.count() == 1
    assert Call.objects.get(workspace=workspace).cost_usd == Decimal("0.5")


def test_requests_known_only_from_telemetry_count_in_the_session_cost(
    workspace, priced, send, client_for
):
    ingest(workspace, [assistant("m1", 100, 0, t=0)])
    send([event("m1", 0.5, 0), event("gone", 1.25, 1)])  # "gone" has no transcript line
    session = Session.objects.get(workspace=workspace, external_id=SESSION)
    cost = selectors.session_cost(session=session)
    assert (cost.calls, cost.telemetry_calls, cost.telemetry_usd) == (2, 2, Decimal("1.75"))
    listed = selectors.sessions_costs(workspace=workspace, sessions=[session])[session.pk]
    assert listed.usd == Decimal("1.75")
    page = client_for("viewer").get(f"/w/{workspace.slug}/traces/sessions/{session.pk}/")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.content.decode()))
    assert "$1.75" in text and "100.0% from telemetry (2 calls)" in text


def subagent_transcript(session):
    """A main thread and two subagents, each with one call (the test sets their starts)."""
    lines = [assistant("main1", 100, 0, t=0, session=session)]
    for n, agent in enumerate(("a1", "a2")):
        lines.append(
            assistant(f"{agent}-c", 50 * (n + 1), 0, t=10 + n, session=session, sidechain=True,
                      agentId=agent)
        )  # fmt: skip
    return lines


def test_cost_by_query_source_and_agent_name(workspace, priced, send, api_for, client_for):
    ingest(workspace, subagent_transcript(SESSION))
    Agent.objects.filter(workspace=workspace, external_id="a2").update(
        start_kind="fork", agent_type="reviewer"
    )
    Agent.objects.filter(workspace=workspace, external_id="a1").update(
        start_kind="fresh", agent_type="explorer"
    )
    send([
        event("main1", 0.5, 0, query_source="repl_main_thread"),
        event("a1-c", 0.25, 1, query_source="agent:custom", **{"agent.name": "explorer"}),
        event("lonely", 2.0, 2, query_source="compact"),  # telemetry only
    ])  # fmt: skip
    costs = selectors.subagent_costs(workspace=workspace)
    rows = {(r["query_source"], r["agent_name"], r["start_kind"]): r for r in costs["rows"]}
    assert set(rows) == {
        ("repl_main_thread", "main", "unknown"),
        ("agent:custom", "explorer", "fresh"),
        ("", "reviewer", "fork"),  # no event: the transcript's type, priced from the table
        ("compact", "(no agent name)", "unknown"),
    }
    assert rows[("", "reviewer", "fork")]["cost"].usd == table_cost(100, 0)
    assert rows[("compact", "(no agent name)", "unknown")]["kind"] == "telemetry only"
    assert costs["rows"][0]["cost"].usd == Decimal("2.0")  # costliest first
    assert costs["total"].usd == Decimal("2.75") + table_cost(100, 0)
    assert costs["telemetry_only"] == 1

    body = api_for("viewer").get("/api/v1/costs/by-agent/").json()
    fork = next(r for r in body["rows"] if r["start_kind"] == "fork")
    assert fork["agent_name"] == "reviewer" and fork["agents"] == 1
    assert Decimal(fork["cost"]["table_usd"]) == table_cost(100, 0).quantize(Decimal("1e-6"))
    assert body["telemetry_only_calls"] == 1

    page = client_for("viewer").get(f"/w/{workspace.slug}/prices/subagents/").content.decode()
    assert 'data-testid="fork"' in page and "agent:custom" in page and "(telemetry only)" in page


def test_cost_by_agent_is_scoped_to_the_workspace(workspace, other_workspace, api_for, send):
    ingest(other_workspace, subagent_transcript("theirs"))
    body = api_for("viewer").get("/api/v1/costs/by-agent/").json()
    assert body["rows"] == [] and body["total"]["calls"] == 0


def test_the_empty_page_says_how_to_send_telemetry(workspace, client_for):
    page = client_for("viewer").get(f"/w/{workspace.slug}/prices/subagents/").content.decode()
    assert "No calls or telemetry yet" in page
    assert "CLAUDE_CODE_ENABLE_TELEMETRY=1" in page and "OTEL_LOGS_EXPORTER=otlp" in page


def test_transcripts_without_telemetry_say_what_would_add_query_sources(
    workspace, priced, client_for
):
    ingest(workspace, [assistant("m1", 100, 0, t=0), claude_user("hello", t=1, session=SESSION)])
    page = client_for("viewer").get(f"/w/{workspace.slug}/prices/subagents/").content.decode()
    assert 'data-testid="no-telemetry"' in page and "OTEL_LOGS_EXPORTER=otlp" in page
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "100.0% from price table" in text


def test_redaction_in_the_read_pass_matches_the_request_redaction(workspace, send):
    """The stored event attributes and the stored body are both hashed (default policy)."""
    from traces.formats.telemetry import decode, identity_hash
    from traces.models import RawUpload, TelemetryPolicy

    send([event("m1", 0.5, 0, **{"user.email": "a@example.com", "user.id": "u-1"})])
    key = TelemetryPolicy.objects.get(workspace=workspace).identity_key
    stored = TelemetryEvent.objects.get()
    assert stored.attributes["user.email"] == identity_hash("a@example.com", key)
    upload = RawUpload.objects.get(workspace=workspace)
    body = upload.file.open("rb").read()
    assert b"a@example.com" not in body
    request = decode(body, upload.content_type, "logs")
    attrs = request.resource_logs[0].scope_logs[0].log_records[0].attributes
    values = {kv.key: kv.value.string_value for kv in attrs}
    assert values["user.id"] == identity_hash("u-1", key)
    assert attributes  # the shared helpers are the ones the OTLP tests use
