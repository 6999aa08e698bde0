"""The prices API: the current table, a new version, versions, load list prices, session cost."""

from decimal import Decimal

import pytest

from governance.models import AuditEvent
from tests.pricing.conftest import ingest_calls
from traces.pricing import services

pytestmark = pytest.mark.django_db

ROW = {
    "model": "claude-sonnet-4-5", "aliases": ["sonnet"], "input": "3", "output": "15",
    "cache_read": "0.3", "cache_write_5m": "3.75", "cache_write_1h": "6",
    "as_of": "2025-11-30", "source": "Anthropic list price",
}  # fmt: skip


def test_no_table_yet_is_404_with_a_reason(api_for):
    response = api_for("viewer").get("/api/v1/prices/")
    assert response.status_code == 404 and "no price table" in response.json()["detail"]


def test_an_editor_saves_versions_and_anyone_reads_them(api_for, members):
    editor = api_for("editor")
    created = editor.post("/api/v1/prices/", {"note": "start", "prices": [ROW]}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["number"] == 1 and body["created_by"] == "editor-a"
    assert body["prices"] == [{**ROW, "input": "3.000000", "output": "15.000000",
        "cache_read": "0.300000", "cache_write_5m": "3.750000", "cache_write_1h": "6.000000"}]  # fmt: skip
    second = editor.post(
        "/api/v1/prices/", {"prices": [{**ROW, "output": "16"}, {**ROW, "model": "gpt-5", "aliases": []}]},
        format="json",
    )  # fmt: skip
    assert second.status_code == 201
    assert second.json()["changes"] == {
        "added": ["gpt-5"],
        "removed": [],
        "changed": ["claude-sonnet-4-5"],
    }
    viewer = api_for("viewer")
    current = viewer.get("/api/v1/prices/").json()
    assert current["number"] == 2 and [p["model"] for p in current["prices"]] == [
        "claude-sonnet-4-5",
        "gpt-5",
    ]
    versions = viewer.get("/api/v1/prices/versions/").json()["results"]
    assert [(v["number"], v["price_count"]) for v in versions] == [(2, 2), (1, 1)]
    old = viewer.get(f"/api/v1/prices/{body['id']}/").json()
    assert old["prices"][0]["output"] == "15.000000"
    assert AuditEvent.objects.filter(action="price_table.version_create").count() == 2
    assert viewer.post("/api/v1/prices/", {"prices": [ROW]}, format="json").status_code == 403


def test_bad_input_names_the_row_and_field(api_for):
    editor = api_for("editor")
    response = editor.post(
        "/api/v1/prices/",
        {"prices": [ROW, {**ROW, "model": "gpt-5", "output": "-2"}]},
        format="json",
    )
    assert response.status_code == 400
    assert (
        response.json()["detail"]
        == "prices[1].output: must be a number ≥ 0 (dollars per million tokens)"
    )
    assert editor.post("/api/v1/prices/", {"prices": "x"}, format="json").status_code == 400
    editor.post("/api/v1/prices/", {"prices": [ROW]}, format="json")
    again = editor.post("/api/v1/prices/", {"prices": [ROW]}, format="json")
    assert again.status_code == 409 and again.json()["version"] == 1


def test_load_list_prices_then_conflict(api_for):
    editor = api_for("editor")
    loaded = editor.post("/api/v1/prices/load-list-prices/")
    assert loaded.status_code == 201 and len(loaded.json()["prices"]) == 13
    opus = next(p for p in loaded.json()["prices"] if p["model"] == "claude-opus-4-5")
    assert (opus["input"], opus["output"], opus["as_of"]) == ("5.000000", "25.000000", "2025-11-30")
    assert editor.post("/api/v1/prices/load-list-prices/").status_code == 409


def test_another_workspaces_version_and_session_are_not_found(
    api_for, workspace, other_workspace, outsider, run_on_commit
):
    theirs = services.price_table_load_list_prices(workspace=other_workspace, user=outsider)
    with run_on_commit():
        their_session = ingest_calls(other_workspace)
    viewer = api_for("viewer")
    assert viewer.get(f"/api/v1/prices/{theirs.pk}/").status_code == 404
    assert viewer.get(f"/api/v1/sessions/{their_session.pk}/cost/").status_code == 404
    assert viewer.get("/api/v1/prices/").status_code == 404  # and theirs is not ours


def test_session_cost_with_values(api_for, workspace, members, priced_session):
    services.price_table_load_list_prices(workspace=workspace, user=members["editor"])
    body = api_for("viewer").get(f"/api/v1/sessions/{priced_session.pk}/cost/").json()
    assert Decimal(body["usd"]) == Decimal("0.079275")
    assert body["source"] == "price table v1" and body["table_version"] == 1
    assert (body["calls"], body["priced_calls"], body["unpriced_calls"]) == (3, 3, 0)
    rows = {r["model"]: r for r in body["by_model"]}
    assert Decimal(rows["claude-sonnet-4-5-20250929"]["usd"]) == Decimal("0.077325")
    assert rows["claude-sonnet-4-5-20250929"]["priced_as"] == "claude-sonnet-4-5"
    assert rows["claude-haiku-4-5-20251001"]["calls"] == 1


def test_the_schema_describes_the_prices_api(api_for):
    schema = api_for("viewer").get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert "Replaces the whole table" in schema["paths"]["/api/v1/prices/"]["post"]["description"]
    assert "never as $0" in schema["paths"]["/api/v1/sessions/{id}/cost/"]["get"]["description"]
