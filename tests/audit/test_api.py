"""The audit API end to end: create, packets out, an LLM judge's answers in, results, exports."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from governance.services import api_token_create
from tests.annotations.conftest import HOSTILE
from traces.audit import services
from traces.audit.analysis.sampling import strata_counts
from traces.audit.models import Audit, AuditStep, Judgment

pytestmark = pytest.mark.django_db


def test_create_list_and_detail(api_for, all_strata, run_on_commit):
    api = api_for("reviewer")
    with run_on_commit():
        response = api.post(
            "/api/v1/audits/",
            {"name": "Via API", "strata_sizes": all_strata, "seed": 3},
            format="json",
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "building" and body["seed"] == 3 and body["job"]
    detail = api.get(f"/api/v1/audits/{body['id']}/").json()
    assert detail["status"] == "open"
    assert detail["progress"]["steps"] == detail["step_count"] > 0
    listed = api.get("/api/v1/audits/").json()
    assert [a["id"] for a in listed["results"]] == [body["id"]]


def test_create_errors_name_the_field(api_for, corpus):
    api = api_for("reviewer")
    response = api.post(
        "/api/v1/audits/", {"name": "x", "strata_sizes": {"building|huge": 1}}, format="json"
    )
    assert response.status_code == 400
    assert "strata_sizes" in response.json()["detail"]
    assert "'building|huge' is not a stratum" in response.json()["detail"]
    assert (
        api_for("editor")
        .post("/api/v1/audits/", {"name": "x", "strata_sizes": {}}, format="json")
        .status_code
        == 403
    )


def test_strata_lists_available_runs(api_for, workspace, corpus):
    body = api_for("viewer").get("/api/v1/audits/strata/").json()
    assert body["counts"] == strata_counts(services.run_infos(workspace=workspace))
    assert body["total"] == sum(body["counts"].values())


def _first_step(packets):
    for packet in packets:
        for step in packet["steps"]:
            if step["had_through_item"] >= 2:
                return packet, step
    raise AssertionError("no step with two items")


def test_an_llm_judge_reads_packets_and_posts_judgments(api_for, audit):
    api = api_for("editor")
    page = api.get(f"/api/v1/audits/{audit.pk}/packets/").json()
    assert page["count"] == audit.packet_count
    packet, step = _first_step(page["results"])
    assert "lossy digest" in packet["summary_label"]
    assert packet["counterfactual_classes"] == [
        "unaffected", "slightly_degraded", "materially_degraded", "impossible",
    ]  # fmt: skip
    bad = api.post(
        f"/api/v1/audits/{audit.pk}/judgments/",
        {
            "step": step["step_id"], "judge_label": "opus judge v1",
            "active_item_ids": [1, step["had_through_item"] + 5, "x"],
            "verbatim_needed": False, "counterfactual": "unaffected", "confidence": "high",
        },
        format="json",
    )  # fmt: skip
    assert bad.status_code == 400
    assert bad.json()["invalid_ids"] == [step["had_through_item"] + 5, "x"]
    assert bad.json()["field"] == "active_item_ids"
    good = api.post(
        f"/api/v1/audits/{audit.pk}/judgments/",
        {
            "step": step["step_id"], "judge_label": "opus judge v1", "active_item_ids": [1, 2],
            "helpful_item_ids": [2], "verbatim_needed": True,
            "counterfactual": "materially_degraded", "confidence": "high",
        },
        format="json",
    )  # fmt: skip
    assert good.status_code == 201, good.content
    tokens = [i["tokens"] for i in packet["items"]]
    assert good.json()["active_tokens"] == tokens[0] + tokens[1]
    assert good.json()["judge_kind"] == "llm"

    results = api.get(f"/api/v1/audits/{audit.pk}/results/").json()
    assert results["n_steps"] == 1
    cf = {row["class"]: row for row in results["counterfactual"]}
    assert (cf["materially_degraded"]["k"], cf["materially_degraded"]["n"]) == (1, 1)
    assert results["verbatim_overall"]["k"] == 1
    band = next(b for b in results["active_by_band"] if b["n"])
    assert band["active_tokens"]["value"] == tokens[0] + tokens[1]
    assert band["active_tokens"]["ci"] is None  # one step: no interval
    assert results["agreement"]["counterfactual_kappa"]["value_text"] == "undefined"
    assert api.get(f"/api/v1/audits/{audit.pk}/results/?judge_kind=human").json()["n_steps"] == 0

    lines = b"".join(api.get(f"/api/v1/audits/{audit.pk}/judgments.jsonl").streaming_content)
    rows = [json.loads(line) for line in lines.splitlines()]
    assert len(rows) == 1 and rows[0]["active_item_ids"] == [1, 2]
    assert rows[0]["step_id"] == step["step_id"]


def test_packets_jsonl_holds_every_packet(api_for, audit):
    response = api_for("viewer").get(f"/api/v1/audits/{audit.pk}/packets.jsonl")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    rows = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert len(rows) == audit.packet_count
    assert {r["run_id"] for r in rows} == set(audit.packets.values_list("run_id", flat=True))
    assert sum(len(r["steps"]) for r in rows) == audit.step_count


def test_roles_and_workspaces(api_for, audit, outsider, other_workspace):
    step = AuditStep.objects.filter(packet__audit=audit).first()
    payload = {
        "step": step.pk, "judge_label": "j", "active_item_ids": [], "verbatim_needed": False,
        "counterfactual": "unaffected", "confidence": "low",
    }  # fmt: skip
    assert (
        api_for("viewer")
        .post(f"/api/v1/audits/{audit.pk}/judgments/", payload, format="json")
        .status_code
        == 403
    )
    stranger = APIClient()
    token = api_token_create(workspace=other_workspace, user=outsider, name="o")
    stranger.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
    for url in (f"/api/v1/audits/{audit.pk}/", f"/api/v1/audits/{audit.pk}/packets/",
                f"/api/v1/audits/{audit.pk}/results/"):  # fmt: skip
        assert stranger.get(url).status_code == 404
    assert (
        stranger.post(f"/api/v1/audits/{audit.pk}/judgments/", payload, format="json").status_code
        == 404
    )
    assert not Judgment.objects.exists()


def test_packet_of_a_crafted_session_escapes_nothing_and_keeps_text(
    workspace, members, hostile_session, run_on_commit, api_for
):
    sizes = dict.fromkeys(strata_counts(services.run_infos(workspace=workspace)), 5)
    with run_on_commit():
        audit = services.audit_create(
            workspace=workspace, actor=members["admin"], name="h", strata_sizes=sizes, seed=1
        )
    rows = b"".join(
        api_for("viewer").get(f"/api/v1/audits/{audit.pk}/packets.jsonl").streaming_content
    )
    packets = [json.loads(line) for line in rows.splitlines()]
    first = next(p for p in packets if p["directive"])
    assert first["directive"] == f"Fix the login bug {HOSTILE}"
    kinds = [i["kind"] for i in first["items"]]
    assert kinds[0] == "operator_message"
    assert Audit.objects.get(pk=audit.pk).status == "open"


def test_packets_are_paged_five_at_a_time(api_for, audit):
    api = api_for("viewer")
    first = api.get(f"/api/v1/audits/{audit.pk}/packets/").json()
    assert len(first["results"]) == min(5, audit.packet_count)
    assert [p["position"] for p in first["results"]] == list(range(1, len(first["results"]) + 1))
    both = api.get(f"/api/v1/audits/{audit.pk}/packets/?page_size=50").json()
    assert len(both["results"]) == min(50, audit.packet_count)
