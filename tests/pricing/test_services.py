"""Price table writes: each edit a new version, audited, with clear errors; and session costs
computed from ingested calls, checked against hand arithmetic."""

from decimal import Decimal

import pytest

from governance.errors import Conflict, InputError
from governance.models import AuditEvent
from tests.pricing.conftest import CALLS, ingest_calls
from traces.models import Call
from traces.pricing import selectors, services
from traces.pricing.analysis.list_prices import LIST_PRICES
from traces.pricing.models import ModelPrice, PriceTableVersion

pytestmark = pytest.mark.django_db

SONNET = {
    "model": "claude-sonnet-4-5", "aliases": [], "input": "3", "output": "15",
    "cache_read": "0.30", "cache_write_5m": "3.75", "cache_write_1h": "6",
    "as_of": "2025-11-30", "source": "test",
}  # fmt: skip


def by_hand(rates: dict, inp: int, cc: int, cr: int, out: int) -> Decimal:
    """Cost from the test's own arithmetic: cache writes at the 5-minute rate."""
    d = {
        k: Decimal(str(v))
        for k, v in rates.items()
        if k in ("input", "output", "cache_read", "cache_write_5m")
    }
    return (
        inp * d["input"] + cc * d["cache_write_5m"] + cr * d["cache_read"] + out * d["output"]
    ) / 10**6


def test_each_edit_makes_a_new_audited_version_and_keeps_the_old(workspace, members):
    editor = members["editor"]
    v1 = services.price_table_version_create(
        workspace=workspace, user=editor, prices=[SONNET], note="first"
    )
    v2 = services.model_price_set(
        workspace=workspace,
        user=editor,
        values={**SONNET, "output": "16"},
        replaces="claude-sonnet-4-5",
    )
    v3 = services.model_price_set(
        workspace=workspace, user=editor, values={**SONNET, "model": "gpt-5"}
    )
    v4 = services.model_price_remove(workspace=workspace, user=editor, model="claude-sonnet-4-5")
    assert [v.number for v in (v1, v2, v3, v4)] == [1, 2, 3, 4]
    assert v2.changes == {"added": [], "removed": [], "changed": ["claude-sonnet-4-5"]}
    assert v3.changes["added"] == ["gpt-5"] and v4.changes["removed"] == ["claude-sonnet-4-5"]
    assert ModelPrice.objects.get(version=v1).output_rate == 15  # the old version is unchanged
    assert ModelPrice.objects.get(version=v2).output_rate == 16
    assert list(selectors.model_prices(version=v4).values_list("model", flat=True)) == ["gpt-5"]
    assert selectors.price_table_current(workspace=workspace) == v4
    events = AuditEvent.objects.filter(workspace=workspace, action="price_table.version_create")
    assert events.count() == 4
    assert events.get(object_id=str(v2.pk)).data["changed"] == ["claude-sonnet-4-5"]
    assert events.get(object_id=str(v2.pk)).actor == editor


def test_saving_the_same_rows_again_is_a_conflict(workspace, members):
    services.price_table_version_create(
        workspace=workspace, user=members["editor"], prices=[SONNET]
    )
    with pytest.raises(Conflict, match="Nothing changed"):
        services.price_table_version_create(
            workspace=workspace, user=members["editor"], prices=[SONNET]
        )
    assert PriceTableVersion.objects.filter(workspace=workspace).count() == 1


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**SONNET, "output": "-1"}, r"prices\[0\].output: must be a number ≥ 0"),
        ({**SONNET, "input": "three"}, r"prices\[0\].input: 'three' is not a number"),
        ({**SONNET, "cache_read": ""}, r"prices\[0\].cache_read: a rate is required"),
        ({**SONNET, "as_of": "30/11/2025"}, r"prices\[0\].as_of: '30/11/2025' is not a date"),
        ({**SONNET, "source": " "}, r"prices\[0\].source: say where"),
        ({**SONNET, "model": ""}, r"prices\[0\].model: a model name is required"),
        ({**SONNET, "input": "NaN"}, r"prices\[0\].input: must be a number ≥ 0"),
    ],
)
def test_bad_rows_name_the_row_and_field(workspace, members, row, message):
    with pytest.raises(InputError, match=message):
        services.price_table_version_create(
            workspace=workspace, user=members["editor"], prices=[row]
        )
    assert not PriceTableVersion.objects.filter(workspace=workspace).exists()


def test_a_name_prices_one_model_only(workspace, members):
    other = {**SONNET, "model": "sonnet-custom", "aliases": ["claude-sonnet-4-5"]}
    with pytest.raises(
        InputError, match=r"prices\[1\]: the name 'claude-sonnet-4-5' is already used"
    ):
        services.price_table_version_create(
            workspace=workspace, user=members["editor"], prices=[SONNET, other]
        )


def test_list_prices_load_once_then_only_what_is_missing(workspace, members):
    v1 = services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    assert v1.prices.count() == len(LIST_PRICES) == 13
    assert "as of 2025-11-30" in v1.note
    with pytest.raises(Conflict):
        services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    services.model_price_remove(workspace=workspace, user=members["editor"], model="gpt-5")
    v3 = services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    assert v3.changes == {"added": ["gpt-5"], "removed": [], "changed": []}


def test_session_cost_is_the_sum_of_its_calls_at_the_current_table(
    workspace, members, run_on_commit
):
    with run_on_commit():
        session = ingest_calls(workspace, (*CALLS, ("m4", "my-local-model", 10, 0, 0, 10)))
    services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    rates = {p["model"]: p for p in LIST_PRICES}
    expected = sum(
        by_hand(rates[model.rsplit("-", 1)[0]], inp, cc, cr, out)
        for _, model, inp, cc, cr, out in CALLS
    )
    summary = selectors.session_cost(session=session)
    assert summary.usd == expected
    assert expected == Decimal("0.079275")  # 0.03885 + 0.038475 + 0.00195 (haiku)
    assert (summary.calls, summary.priced_calls, summary.unpriced_models) == (
        4,
        3,
        ["my-local-model"],
    )
    assert summary.source == "price table v1"
    # a new version changes the figure and names itself
    services.model_price_set(
        workspace=workspace, user=members["editor"],
        values={**SONNET, "input": "6"}, replaces="claude-sonnet-4-5",
    )  # fmt: skip
    again = selectors.session_cost(session=session)
    assert again.usd - summary.usd == Decimal(1500 * 3) / 10**6
    assert again.source == "price table v2"
    listed = selectors.sessions_costs(workspace=workspace, sessions=[session])
    assert listed[session.pk].usd == again.usd


def test_without_a_price_table_nothing_is_priced(workspace, priced_session):
    summary = selectors.session_cost(session=priced_session)
    assert summary.priced_calls == 0 and summary.calls == 3 and summary.source == "no price"


def test_a_workspace_prices_with_its_own_table(workspace, other_workspace, members, priced_session):
    services.price_table_version_create(workspace=other_workspace, user=None, prices=[SONNET])
    assert selectors.session_cost(session=priced_session).priced_calls == 0


def test_agents_costs_add_up_to_the_session_and_match_their_calls(
    workspace, members, named_sessions
):
    services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    rates = {p["model"]: p for p in LIST_PRICES}
    session = named_sessions[0]
    costs = selectors.agents_costs(session=session)
    assert len(costs) == 2  # main and one subagent
    for agent_id, summary in costs.items():
        calls = Call.objects.filter(session=session, agent_id=agent_id)
        expected = sum(
            by_hand(rates[c.model.lower()], c.input_tokens, c.cache_creation_tokens,
                    c.cache_read_tokens, c.output_tokens)
            for c in calls
        )  # fmt: skip
        assert summary.usd == expected and summary.calls == calls.count() > 0
    total, _ = selectors.session_and_agents_costs(session=session)
    assert (
        sum(s.usd for s in costs.values())
        == total.usd
        == selectors.session_cost(session=session).usd
    )
    assert total.calls == session.call_count
