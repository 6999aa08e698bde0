"""Instruction visibility on a planted corpus through the real ingest path: the selector,
the API (values, delivery rules, the 400s) and the page."""

import pytest
from django.urls import reverse

from governance.errors import InputError
from qualification.contextfiles.models import Instruction
from qualification.contextfiles.services import context_file_import
from tests.analytics.planted_instruction_visibility import INSTRUCTION, LEDGER_TEXT, sessions
from traces.analytics.instruction_visibility_selectors import (
    instruction_visibility_for,
    subject_for,
)
from traces.analytics.selectors import AnalyticsFilters
from traces.services import ingest_bytes

pytestmark = pytest.mark.django_db
URL = "/api/v1/analytics/instruction-visibility/"


@pytest.fixture
def planted(workspace):
    for name, data in sessions().items():
        ingest_bytes(
            workspace=workspace,
            name=f"{name}.jsonl",
            data=data,
            source="demo",
            refresh_analytics=False,
        )


@pytest.fixture
def ledger_instruction(workspace, members):
    context_file_import(
        workspace=workspace,
        repository="acme/shop",
        path="AGENTS.md",
        revision="r1",
        text=LEDGER_TEXT,
        actor=members["editor"],
    )
    return Instruction.objects.get(workspace=workspace, text__contains="Never commit")


def _rate(body, count, n):
    assert (body["count"], body["n"]) == (count, n)
    assert body["rate"] == pytest.approx(count / n)
    low, high = body["ci"]
    assert low <= count / n <= high


def test_free_text_recorded_delivery(planted, api_for):
    response = api_for("viewer").get(URL, {"instruction": INSTRUCTION})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["delivery"] == "recorded"
    overall = body["overall"]
    assert overall["n"] == 19 and overall["calls_without_thinking"] == 5
    _rate(overall["exact"], 1, 19)
    _rate(overall["normalised"], 3, 19)
    assert overall["normalised"]["ci"] == pytest.approx([0.0552, 0.3757], abs=5e-4)
    assert body["calls_outside_window"] == 1 + 10 + 8
    assert (body["sessions"], body["sessions_delivered"]) == (3, 1)
    bins = {row["label"]: row for row in body["by_turns"]}
    assert (bins["0"]["n"], bins["0"]["exact"]["count"]) == (1, 1)
    assert (bins["1–4"]["n"], bins["1–4"]["normalised"]["count"]) == (4, 1)
    assert (bins["5–9"]["n"], bins["5–9"]["calls_without_thinking"]) == (4, 1)
    assert (bins["10–19"]["n"], bins["10–19"]["calls_without_thinking"]) == (6, 4)
    assert (bins["20–49"]["n"], bins["20–49"]["normalised"]["count"]) == (4, 1)
    assert bins["20–49"]["exact"]["count"] == 0
    assert bins["50–99"]["n"] == 0 and bins["50–99"]["exact"]["rate"] is None
    [session] = body["by_session"]
    assert session["external_id"].endswith("000000000001") and session["n"] == 19


def test_session_start_delivery(planted, api_for):
    body = (
        api_for("viewer").get(URL, {"instruction": INSTRUCTION, "delivery": "session_start"}).json()
    )
    overall = body["overall"]
    assert overall["n"] == 20 + 10 + 8
    _rate(overall["exact"], 3, 38)
    _rate(overall["normalised"], 5, 38)
    assert body["calls_outside_window"] == 0
    by_session = {row["external_id"][-1]: row for row in body["by_session"]}
    _rate(by_session["2"]["normalised"], 0, 10)
    _rate(by_session["3"]["exact"], 2, 8)


def test_ledger_instruction_from_the_repository_sessions(planted, ledger_instruction, api_for):
    body = api_for("viewer").get(URL, {"ledger_instruction": ledger_instruction.pk}).json()
    assert body["delivery"] == "repository"
    assert body["ledger_instruction"]["repository"] == "acme/shop"
    assert body["sessions_from_repository"] == 1
    overall = body["overall"]
    assert overall["n"] == 19 + 8
    _rate(overall["exact"], 3, 27)
    _rate(overall["normalised"], 5, 27)
    assert body["calls_outside_window"] == 1 + 10


def test_too_many_calls_is_refused_naming_the_filters(workspace, planted):
    subject = subject_for(workspace=workspace, instruction=INSTRUCTION)
    with pytest.raises(InputError, match="The filters reach 43 calls; at most 40") as refused:
        instruction_visibility_for(
            workspace=workspace, filters=AnalyticsFilters(), subject=subject, max_calls=40
        )
    assert refused.value.payload == {"field": "filters"}
    narrowed = instruction_visibility_for(
        workspace=workspace, filters=AnalyticsFilters(project="shop"), subject=subject, max_calls=40
    )
    assert narrowed["calls_read"] == 8


def test_filters_apply(planted, api_for):
    body = (
        api_for("viewer")
        .get(URL, {"instruction": INSTRUCTION, "project": "shop", "delivery": "session_start"})
        .json()
    )
    assert body["overall"]["n"] == 8 and body["sessions"] == 1


@pytest.mark.parametrize(
    "params, field",
    [
        ({}, "instruction"),
        ({"instruction": INSTRUCTION, "ledger_instruction": 1}, "instruction"),
        ({"instruction": "  ...  "}, "instruction"),
        ({"ledger_instruction": "x"}, "ledger_instruction"),
        ({"instruction": INSTRUCTION, "delivery": "sometimes"}, "delivery"),
        ({"instruction": INSTRUCTION, "delivery": "repository"}, "delivery"),
    ],
)
def test_bad_requests_name_the_field(planted, api_for, params, field):
    response = api_for("viewer").get(URL, params)
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field
    assert f"`{field}`" in body["detail"]


def test_neither_and_both_say_which(api_for):
    neither = api_for("viewer").get(URL).json()["detail"]
    both = (
        api_for("viewer").get(URL, {"instruction": "x y", "ledger_instruction": 3}).json()["detail"]
    )
    assert "`ledger_instruction`" in neither and "neither" in neither
    assert "not both" in both


def test_another_workspaces_instruction_is_404(planted, other_workspace, members, api_for):
    context_file_import(
        workspace=other_workspace, repository="other/repo", path="AGENTS.md", revision="r1",
        text=LEDGER_TEXT, actor=None,
    )  # fmt: skip
    foreign = Instruction.objects.filter(workspace=other_workspace).first()
    assert api_for("viewer").get(URL, {"ledger_instruction": foreign.pk}).status_code == 404


def test_page_shows_the_counts(workspace, planted, ledger_instruction, client_for):
    client = client_for("viewer")
    page = reverse("analytics:instruction_visibility", args=[workspace.slug])
    response = client.get(page, {"instruction": INSTRUCTION})
    html = response.content.decode()
    assert response.status_code == 200
    assert (
        "Absence from visible reasoning does not prove that the instruction had no influence."
        in html
    )
    assert "3 of n = 19" in html and "1 of n = 19" in html
    assert "15.8%" in html  # 3/19
    assert "Instruction visibility" in html
    empty = client.get(page).content.decode()
    assert "Choose an instruction to look for" in empty
    assert ledger_instruction.text[:30] in empty  # offered in the ledger choices
    refused = client.get(
        page, {"instruction": INSTRUCTION, "ledger_instruction": ledger_instruction.pk}
    )
    assert "not both" in refused.content.decode()
    csv_url = reverse("analytics:instruction_visibility_csv", args=[workspace.slug, "turns"])
    rows = client.get(csv_url, {"instruction": INSTRUCTION}).content.decode().splitlines()
    assert rows[0].startswith("turns_from,turns_to,n,calls_without_thinking,thinking_blocks,")
    assert rows[4].startswith("10,19,6,4,6,0,0.0,0.0,")
    sessions_csv = client.get(
        reverse("analytics:instruction_visibility_csv", args=[workspace.slug, "sessions"]),
        {"instruction": INSTRUCTION},
    ).content.decode()
    assert ",19,5,21,1,0.05263157894736842," in sessions_csv
    assert client.get(csv_url).status_code == 400
    nothing = client.get(page, {"instruction": INSTRUCTION, "project": "no-such-project"})
    assert "No calls match these filters" in nothing.content.decode()
    never = client.get(page, {"instruction": "Always write haiku commit messages."})
    text = never.content.decode()
    assert "The instruction was never delivered in these calls" in text
    assert "from each agent&#x27;s first call" in text or "from each agent's first call" in text
    assert (
        "19 calls" not in text
        and "0 calls in the window without visible thinking; 43 calls" in text
    )
