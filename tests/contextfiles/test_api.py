"""The context-file API over real HTTP clients, tokens and roles."""

import io
import json
import tarfile

import pytest

from governance.models import AuditEvent
from qualification.contextfiles.models import Evaluation, Instruction, Trial
from tests.contextfiles.conftest import AGENTS_MD, table_tasks, trials_csv

pytestmark = pytest.mark.django_db

IMPORT = {"repository": "acme/shop", "path": "AGENTS.md", "revision": "c0ffee1", "text": AGENTS_MD}


@pytest.fixture
def editor_api(api_for):
    return api_for("editor")


@pytest.fixture
def file_id(editor_api, run_on_commit):
    with run_on_commit():
        response = editor_api.post("/api/v1/context-files/", IMPORT, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@pytest.fixture
def evaluation_id(editor_api, file_id):
    body = {
        "context_file": file_id,
        "name": "AGENTS.md vs no file",
        "model_name": "m",
        "model_version": "1",
        "harness_version": "h 1",
        "task_set_version": "t v1",
        "expected_tasks": 100,
        "decoding": {"temperature": 0},
        "delta": 0.05,
        "margin": 0.10,
        "ablations": [{"name": "rules-only", "categories": ["failure_prevention"]}],
    }
    response = editor_api.post("/api/v1/context-file-evaluations/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_import_returns_the_instructions(editor_api, run_on_commit):
    with run_on_commit():
        response = editor_api.post("/api/v1/context-files/", IMPORT, format="json")
    data = response.json()
    assert response.status_code == 201 and data["created"] is True
    assert data["revision"]["number"] == 1 and data["revision"]["revision"] == "c0ffee1"
    assert len(data["instructions"]) == 15
    first = data["instructions"][1]
    assert first["text"] == "- Run `make test` before every commit."
    assert first["category"] == "build_test" and first["flags"] == [
        "no owner",
        "no reason",
        "never reviewed",
    ]
    assert data["drift_check_job"] is not None
    again = editor_api.post("/api/v1/context-files/", IMPORT, format="json")
    assert again.status_code == 200 and again.json()["created"] is False


def test_import_validation_errors(editor_api):
    response = editor_api.post("/api/v1/context-files/", IMPORT | {"text": ""}, format="json")
    assert response.status_code == 400 and "text" in response.json()
    response = editor_api.post("/api/v1/context-files/", IMPORT | {"text": "   \n"}, format="json")
    assert response.status_code == 400


def test_viewers_read_but_cannot_write(api_for, file_id):
    viewer = api_for("viewer")
    assert viewer.get(f"/api/v1/context-files/{file_id}/").status_code == 200
    assert viewer.post("/api/v1/context-files/", IMPORT, format="json").status_code == 403
    instruction = Instruction.objects.first()
    assert (
        viewer.patch(
            f"/api/v1/instructions/{instruction.pk}/", {"owner": "x"}, format="json"
        ).status_code
        == 403
    )


def test_ledger_patch(editor_api, file_id):
    instruction = Instruction.objects.get(position=2)
    response = editor_api.patch(
        f"/api/v1/instructions/{instruction.pk}/",
        {
            "owner": "platform",
            "reason": "CI parity",
            "affects": "red main",
            "review_trigger": "Makefile changes",
            "deletion_condition": "CI runs it",
            "last_reviewed_on": "2026-11-01",
            "category": "failure_prevention",
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["owner"] == "platform" and data["category_corrected"] is True
    assert data["review_due"] == "2027-04-30" and data["flags"] == []
    bad = editor_api.patch(
        f"/api/v1/instructions/{instruction.pk}/", {"last_reviewed_on": "soon"}, format="json"
    )
    assert bad.status_code == 400 and "last_reviewed_on" in bad.json()
    assert (
        editor_api.put(f"/api/v1/instructions/{instruction.pk}/", {}, format="json").status_code
        == 405
    )
    flagged = editor_api.get(f"/api/v1/instructions/?context_file={file_id}&flagged=true").json()
    assert flagged["count"] == 14 and instruction.pk not in [i["id"] for i in flagged["results"]]
    category = editor_api.get("/api/v1/instructions/?category=failure_prevention").json()
    assert instruction.pk in [i["id"] for i in category["results"]]


def test_other_workspaces_objects_are_404(
    api_for, members, outsider, other_workspace, file_id, evaluation_id
):
    from rest_framework.test import APIClient

    from governance.services import api_token_create

    token = api_token_create(workspace=other_workspace, user=outsider).plaintext
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    instruction = Instruction.objects.first()
    for url in (
        f"/api/v1/context-files/{file_id}/",
        f"/api/v1/instructions/{instruction.pk}/",
        f"/api/v1/context-file-evaluations/{evaluation_id}/",
        f"/api/v1/context-file-evaluations/{evaluation_id}/results/",
    ):
        assert client.get(url).status_code == 404, url
    assert (
        client.patch(
            f"/api/v1/instructions/{instruction.pk}/", {"owner": "x"}, format="json"
        ).status_code
        == 404
    )
    assert (
        client.post(
            f"/api/v1/context-file-evaluations/{evaluation_id}/trials/",
            "task_id,arm,success\n",
            content_type="text/csv",
        ).status_code
        == 404
    )
    assert client.get("/api/v1/context-files/").json()["count"] == 0
    body = {
        "context_file": file_id,
        "name": "x",
        "model_name": "m",
        "model_version": "1",
        "harness_version": "h",
        "task_set_version": "t",
    }
    assert client.post("/api/v1/context-file-evaluations/", body, format="json").status_code == 404


def test_trials_as_csv_lock_the_registration_and_results_have_the_issue_keys(
    editor_api, evaluation_id
):
    url = f"/api/v1/context-file-evaluations/{evaluation_id}"
    empty = editor_api.get(f"{url}/results/").json()
    assert empty["status"] == "awaiting_trials" and empty["verdict"] is None
    csv = trials_csv(table_tasks(59, 6, 16, 80), arms=("full", "rules-only"))
    response = editor_api.post(f"{url}/trials/", csv, content_type="text/csv")
    assert response.status_code == 201, response.content
    assert response.json() | {"batch": None} == {
        "accepted": 483,
        "already_recorded": 0,
        "locked_now": True,
        "batch": None,
        "status": "locked",
    }
    results = editor_api.get(f"{url}/results/").json()
    assert {
        "n_pairs",
        "table",
        "difference",
        "ci95",
        "ci90",
        "mcnemar_midp",
        "verdict",
        "power",
        "needed_pairs",
        "arms",
    } <= set(results)
    assert results["n_pairs"] == 161
    assert results["table"] == {"both": 59, "with_only": 6, "without_only": 16, "neither": 80}
    assert results["difference"] == pytest.approx(-0.0621, abs=5e-5)
    assert results["ci95"] == [pytest.approx(-0.1186, abs=5e-5), pytest.approx(-0.0046, abs=5e-5)]
    assert results["verdict"] == "hurts"
    assert set(results["arms"]) == {"baseline", "full", "rules-only"}
    assert results["arms"]["full"]["cost"]["mean_input_tokens"] == 12000
    assert 0 < results["power"] < 1 and results["needed_pairs"] > 0
    trials = editor_api.get(f"{url}/trials/?page_size=5").json()
    assert trials["count"] == 483 and len(trials["results"]) == 5


def test_trials_as_a_json_list_with_line_numbered_errors(editor_api, evaluation_id):
    url = f"/api/v1/context-file-evaluations/{evaluation_id}/trials/"
    body = json.dumps(
        [
            {"task_id": "t1", "arm": "baseline", "repeat": 1, "success": True},
            {"task_id": "t1", "arm": "full", "repeat": 1, "success": True},
            {"task_id": "t1", "arm": "rules-only", "repeat": 1, "success": "often"},
            {"task_id": "t2", "arm": "full", "repeat": 1, "success": False},
        ],
        indent=2,
    )
    response = editor_api.post(url, body, content_type="application/json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors == [
        {"line": 14, "error": "item 3: success must be true or false, not 'often'"},
        {
            "line": 20,
            "error": "unpaired: task t2 repeat 1 has no trial in arm(s) baseline, rules-only",
        },
    ]
    assert "nothing was saved" in response.json()["detail"]
    assert not Trial.objects.exists()
    assert Evaluation.objects.get(pk=evaluation_id).status == "registered"


def test_trials_as_a_multipart_file(editor_api, evaluation_id):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile(
        "trials.csv",
        trials_csv({"t1": (True, False)}, arms=("full", "rules-only")).encode(),
        content_type="text/csv",
    )
    response = editor_api.post(
        f"/api/v1/context-file-evaluations/{evaluation_id}/trials/",
        {"file": upload},
        format="multipart",
    )
    assert response.status_code == 201 and response.json()["accepted"] == 3


def test_patch_on_a_locked_registration_creates_a_new_evaluation(editor_api, evaluation_id):
    url = f"/api/v1/context-file-evaluations/{evaluation_id}/"
    open_change = editor_api.patch(url, {"name": "renamed"}, format="json")
    assert open_change.status_code == 200 and open_change.json()["id"] == evaluation_id
    editor_api.post(
        f"{url}trials/",
        trials_csv({"t1": (True, False)}, arms=("full", "rules-only")),
        content_type="text/csv",
    )
    locked = editor_api.patch(
        url, {"margin": 0.15, "reason": "fewer tasks than planned"}, format="json"
    )
    assert locked.status_code == 201
    new = locked.json()
    assert (
        new["supersedes"] == evaluation_id
        and new["margin"] == 0.15
        and new["status"] == "registered"
    )
    assert locked["Location"].endswith(f"/context-file-evaluations/{new['id']}/")
    old = editor_api.get(url).json()
    assert (
        old["status"] == "superseded"
        and old["superseded_by"] == new["id"]
        and old["margin"] == 0.10
    )
    again = editor_api.patch(url, {"margin": 0.2}, format="json")
    assert again.status_code == 400 and "superseded" in again.json()["detail"]
    assert AuditEvent.objects.filter(action="evaluation.supersede").count() == 1


def test_decisions_need_a_reviewer(api_for, editor_api, evaluation_id):
    url = f"/api/v1/context-file-evaluations/{evaluation_id}/"
    editor_api.post(
        f"{url}trials/",
        trials_csv(table_tasks(8, 3, 1, 2), arms=("full", "rules-only")),
        content_type="text/csv",
    )
    body = {
        "action": "keep_provisionally",
        "rationale": "Prevents payments-sandbox incidents (threat: …).",
    }
    assert editor_api.post(f"{url}decisions/", body, format="json").status_code == 403
    response = api_for("reviewer").post(f"{url}decisions/", body, format="json")
    assert response.status_code == 201
    assert (
        response.json()["decided_by"] == "reviewer-a"
        and response.json()["results"]["n_pairs"] == 14
    )
    assert len(editor_api.get(f"{url}decisions/").json()) == 1
    bad = api_for("reviewer").post(
        f"{url}decisions/", {"action": "shrug", "rationale": "x"}, format="json"
    )
    assert bad.status_code == 400


def test_paired_comparison_calculator(api_for):
    client = api_for("viewer")
    data = client.get(
        "/api/v1/paired-comparison/?both=59&with_only=6&without_only=16&neither=80&delta=0.05&margin=0.1"
    ).json()
    assert data["difference"] == pytest.approx(-0.0621, abs=5e-5)
    assert data["ci95"][0] == pytest.approx(-0.1186, abs=5e-5) and data["ci95"][1] == pytest.approx(
        -0.0046, abs=5e-5
    )
    assert data["verdict"] == "hurts"
    mcnemar = client.get(
        "/api/v1/paired-comparison/?both=25&with_only=8&without_only=2&neither=5"
    ).json()
    assert mcnemar["mcnemar_midp"] == pytest.approx(0.065, abs=5e-4)
    assert mcnemar["mcnemar_p_exact"] == pytest.approx(0.109, abs=5e-4)
    tost = client.get(
        "/api/v1/paired-comparison/?both=30&with_only=0&without_only=0&neither=10&margin=0.1"
    ).json()
    assert tost["ci90"] == [pytest.approx(-0.051, abs=5e-4), pytest.approx(0.051, abs=5e-4)]
    assert tost["verdict"] == "equivalent" and tost["within_margin"] is True
    small_loss = client.get(
        "/api/v1/paired-comparison/?both=700&with_only=20&without_only=70&neither=210&margin=0.1"
    ).json()
    assert (small_loss["verdict"], small_loss["within_margin"]) == ("hurts", True)
    assert (
        client.get(
            "/api/v1/paired-comparison/?both=0&with_only=0&without_only=0&neither=0"
        ).status_code
        == 400
    )
    bad = client.get("/api/v1/paired-comparison/?both=-1&with_only=2&without_only=0&neither=1")
    assert bad.status_code == 400 and "both" in bad.json()
    negative = client.get(
        "/api/v1/paired-comparison/?both=50&with_only=2&without_only=4&neither=44&delta=-0.1"
    )
    assert negative.status_code == 400 and "delta" in negative.json()


def test_listings_command_verifications_and_drift_checks(editor_api, file_id, run_on_commit):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in ["shop/api/app.py", "shop/worker/jobs.py", "shop/../../etc/passwd"]:
            info = tarfile.TarInfo(name)
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
    buffer.name = "shop.tar.gz"
    buffer.seek(0)
    response = editor_api.post(
        "/api/v1/repository-listings/",
        {"repository": "acme/shop", "file": buffer},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    listing = response.json()
    assert (
        listing["path_count"] == 2
        and listing["skipped_count"] == 1
        and listing["stripped_root"] == "shop/"
    )
    json_listing = editor_api.post(
        "/api/v1/repository-listings/", {"repository": "r", "paths": ["a/b.py"]}, format="json"
    )
    assert json_listing.status_code == 201
    bad = editor_api.post(
        "/api/v1/repository-listings/", {"repository": "r", "paths": ["/etc/passwd"]}, format="json"
    )
    assert bad.status_code == 400 and "names no files" in bad.json()["detail"]

    verification = editor_api.post(
        "/api/v1/command-verifications/",
        {
            "context_file": file_id,
            "command": "make test",
            "passed": False,
            "exit_code": 2,
            "output": "<b>boom</b>",
        },
        format="json",
    )
    assert verification.status_code == 201 and verification.json()["via"] == "api"
    with run_on_commit():
        started = editor_api.post(
            f"/api/v1/context-files/{file_id}/drift-checks/",
            {"listing": listing["id"]},
            format="json",
        )
    assert started.status_code == 202
    latest = editor_api.get(f"/api/v1/context-files/{file_id}/drift-checks/").json()
    assert latest["status"] == "succeeded" and latest["listing"] == listing["id"]
    by_check = {}
    for finding in latest["findings"]:
        by_check.setdefault(finding["check"], []).append(finding)
    assert any("failed when last verified (exit 2)" in f["message"] for f in by_check["commands"])
    assert {f["data"]["path"] for f in by_check["paths"]} == {"tests/unit", "gen/", "docs/api.md"}


def test_revision_diff_endpoint(editor_api, file_id, run_on_commit):
    with run_on_commit():
        editor_api.post(
            "/api/v1/context-files/",
            IMPORT
            | {
                "revision": "d2",
                "text": AGENTS_MD.replace(
                    "Do not commit secrets.", "Do not commit secrets or tokens."
                ),
            },
            format="json",
        )
    diff = editor_api.get(f"/api/v1/context-files/{file_id}/diff/").json()
    assert (diff["from_revision"], diff["to_revision"]) == (1, 2)
    assert diff["counts"]["changed"] == 1 and diff["counts"]["unchanged"] == 14
    changed = next(c for c in diff["changes"] if c["kind"] == "changed")
    assert {"op": "insert", "text": " or tokens"} in changed["segments"] or any(
        s["op"] == "insert" and "tokens" in s["text"] for s in changed["segments"]
    )
    assert editor_api.get(f"/api/v1/context-files/{file_id}/diff/?from=1&to=9").status_code == 404


def test_openapi_schema_documents_the_endpoints(api_for):
    client = api_for("viewer")
    schema = client.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    for path in [
        "/api/v1/context-files/",
        "/api/v1/instructions/{id}/",
        "/api/v1/context-file-evaluations/",
        "/api/v1/context-file-evaluations/{id}/trials/",
        "/api/v1/context-file-evaluations/{id}/results/",
        "/api/v1/paired-comparison/",
    ]:
        assert path in paths, path
    assert (
        "text/csv"
        in paths["/api/v1/context-file-evaluations/{id}/trials/"]["post"]["requestBody"]["content"]
    )
