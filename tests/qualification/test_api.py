"""The qualification API over a real HTTP client stack: names fixed by the issue, roles, 404s
across workspaces, line-numbered upload errors and the budget-check verdict."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from governance.models import Job
from qualification.analysis.simulate import simulate_sweep
from qualification.models import (
    AssemblyAudit,
    OperatingLimit,
    Qualification,
    QualificationAnalysis,
    Trial,
)
from tests.qualification.conftest import FLAT_THEN_DROP, STRATA, to_csv

pytestmark = pytest.mark.django_db

CREATE = {
    "name": "API sweep",
    "model": {"name": "model-x", "version": "1"},
    "configuration": {"decoding": {"temperature": 0}, "harness_version": "h1"},
    "workload": {"name": "repo", "version": "1", "families": ["retrieval", "code_change"]},
    "threshold": 0.85,
    "consequence": "medium",
    "strata": STRATA,
    "supersedes": None,
}


def jsonable(rows):
    return [{k: v for k, v in r.items() if v is not None} for r in rows]


@pytest.fixture
def api_qualification(api_for):
    response = api_for("editor").post("/api/v1/qualifications/", CREATE, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_create_returns_the_pinned_configuration(api_qualification):
    body = api_qualification
    assert body["status"] == "collecting" and body["threshold"] == 0.85
    assert body["configuration"]["model_name"] == "model-x"
    assert len(body["configuration"]["fingerprint"]) == 64
    assert [f["key"] for f in body["workload"]["families"]] == ["code_change", "retrieval"]
    assert body["effective_params"]["knee_delta"] == 0.05
    assert body["effective_params"]["bootstrap_replicates"] == 2000


def test_create_errors_name_the_field(api_for):
    client = api_for("editor")
    response = client.post("/api/v1/qualifications/", {**CREATE, "threshold": 1.5}, format="json")
    assert response.status_code == 400
    assert "threshold" in response.json()["detail"]
    response = client.post(
        "/api/v1/qualifications/", {**CREATE, "model": {"name": "m"}}, format="json"
    )
    assert response.status_code == 400 and "version" in response.json()["model"]


@pytest.mark.parametrize("value", [1, 2])
def test_min_repeats_below_three_is_refused_naming_the_field(api_for, value):
    client = api_for("editor")
    response = client.post(
        "/api/v1/qualifications/",
        {**CREATE, "analysis_params": {"min_repeats": value}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith(
        "min_repeats: must be a whole number of at least 3: with fewer repeats reliability"
    )
    assert not Qualification.objects.exists()
    created = client.post(
        "/api/v1/qualifications/", {**CREATE, "analysis_params": {"min_repeats": 3}}, format="json"
    )
    assert created.status_code == 201 and created.json()["effective_params"]["min_repeats"] == 3
    url = f"/api/v1/qualifications/{created.json()['id']}/"
    patched = client.patch(url, {"analysis_params": {"min_repeats": value}}, format="json")
    assert patched.status_code == 400 and patched.json()["detail"].startswith("min_repeats:")
    assert Qualification.objects.get().analysis_params == {"min_repeats": 3}


def test_viewers_read_but_cannot_write(api_for, api_qualification):
    viewer = api_for("viewer")
    assert viewer.get("/api/v1/qualifications/").json()["count"] == 1
    assert viewer.post("/api/v1/qualifications/", CREATE, format="json").status_code == 403
    url = f"/api/v1/qualifications/{api_qualification['id']}/trials/"
    assert viewer.post(url, [], format="json").status_code == 403


def test_json_trials_are_saved_at_once_and_results_follow(
    api_for, api_qualification, planted_rows, run_on_commit
):
    client = api_for("editor")
    url = f"/api/v1/qualifications/{api_qualification['id']}/trials/"
    with run_on_commit():
        response = client.post(url, jsonable(planted_rows), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["trials_saved"] == 2000 and body["status"] == "loaded" and body["errors"] == []
    assert body["job"]["status"] == "succeeded"
    listing = client.get(url + "?page_size=5").json()
    assert listing["count"] == 2000 and listing["results"][0]["task_id"] == "code-001"

    results = client.get(f"/api/v1/qualifications/{api_qualification['id']}/results/").json()
    assert results["status"] == "ok" and results["reasons"] == []
    assert results["weakest_family"] == "code_change"
    assert results["proposed_limit_tokens"] == 16000
    code = next(f for f in results["families"] if f["family"] == "code_change")
    assert (code["ecl_tokens"], code["ecl_status"], code["knee_tokens"]) == (
        32000,
        "within_range",
        32000,
    )
    assert code["ecl_lower95_tokens"] == 32000
    stratum = code["strata"][0]
    assert set(stratum) >= {
        "tokens",
        "tasks",
        "repeats",
        "accuracy",
        "ci",
        "reliability",
        "retrieval",
    }
    assert stratum["tasks"] == 40 and stratum["repeats"] == 5
    assert stratum["ci"][0] < stratum["accuracy"] < stratum["ci"][1]
    assert "saturation_tokens" in code and results["params"]["threshold"] == 0.85


def test_results_of_an_insufficient_sweep_say_which_rule_refused(
    api_for, api_qualification, run_on_commit
):
    # Every task run only twice per stratum: below the 3 repeats METHODS §7 requires.
    rows = simulate_sweep(FLAT_THEN_DROP, STRATA, tasks=40, repeats=2, seed=3)
    client = api_for("editor")
    qid = api_qualification["id"]
    with run_on_commit():
        saved = client.post(f"/api/v1/qualifications/{qid}/trials/", jsonable(rows), format="json")
    assert saved.status_code == 201 and saved.json()["trials_saved"] == 800

    response = client.get(f"/api/v1/qualifications/{qid}/results/")
    assert response.status_code == 200
    results = response.json()
    assert results["status"] == "insufficient"
    assert [(r["rule"], r["family"]) for r in results["reasons"]] == [
        ("min_repeats", "code_change"),
        ("min_repeats", "retrieval"),
    ]
    reason = results["reasons"][0]
    assert reason["strata"] == STRATA and len(reason["tasks"]) == 40
    assert reason["message"].startswith(
        "Strata with fewer than 3 repeats per task in code_change: 8k: 40 tasks (fewest 2)"
    )
    assert reason["remedy"].startswith("Run at least 3 independent repeats (5 preferred)")
    for family in results["families"]:
        assert (family["ecl_tokens"], family["ecl_status"]) == (None, "refused")
        assert family["ecl_lower95_tokens"] is None
        assert [s["repeats"] for s in family["strata"]] == [2] * 5  # curves are still reported
    assert results["weakest_family"] is None and results["proposed_limit_tokens"] is None
    assert results["proposal"]["reason"] == (
        "No limit: the ECL of code_change, retrieval was refused, so the weakest family is "
        "unknown. Fix the data the refusal names."
    )
    proposal = client.post("/api/v1/operating-limits/", {"qualification": qid}, format="json")
    assert proposal.status_code == 409 and "proposes no limit" in proposal.json()["detail"]


def _partial_upload(client, qid, rows):
    """Trials sent as partial queue no analysis: the next read finds the cache empty."""
    response = client.post(
        f"/api/v1/qualifications/{qid}/trials/?partial=true", jsonable(rows), format="json"
    )
    assert response.status_code == 201, response.json()


def test_results_cache_miss_answers_202_with_the_queued_job(
    api_for, api_qualification, planted_rows, run_on_commit
):
    client = api_for("viewer")  # reading results may queue their computation
    qid = api_qualification["id"]
    _partial_upload(api_for("editor"), qid, planted_rows)
    url = f"/api/v1/qualifications/{qid}/results/"
    with run_on_commit():  # the queued job runs when this block commits, after the responses
        pending = client.get(url)
        assert pending.status_code == 202
        body = pending.json()
        assert (body["qualification"], body["data_version"], body["status"]) == (
            qid,
            1,
            "pending",
        )
        assert (body["job"]["kind"], body["job"]["status"]) == ("qualification_analysis", "queued")
        assert body["job"]["url"].endswith(f"/api/v1/jobs/{body['job']['id']}/")
        assert not QualificationAnalysis.objects.exists()  # nothing computed in the request
        again = client.get(url)
        assert again.status_code == 202 and again.json()["job"]["id"] == body["job"]["id"]
    assert Job.objects.filter(kind="qualification_analysis").count() == 1
    job = Job.objects.get(pk=body["job"]["id"])
    assert job.status == "succeeded" and job.params == {"qualification_id": qid, "data_version": 1}
    done = client.get(url)
    assert done.status_code == 200
    results = done.json()
    assert (results["data_version"], results["status"], results["proposed_limit_tokens"]) == (
        1,
        "ok",
        16000,
    )
    assert QualificationAnalysis.objects.get().job_id == job.pk


def test_proposal_on_a_cache_miss_is_409_with_the_job_then_succeeds(
    api_for, api_qualification, planted_rows, run_on_commit
):
    editor = api_for("editor")
    qid = api_qualification["id"]
    _partial_upload(editor, qid, planted_rows)
    with run_on_commit():
        response = editor.post("/api/v1/operating-limits/", {"qualification": qid}, format="json")
        assert response.status_code == 409
        body = response.json()
        assert (body["code"], body["status"], body["data_version"]) == (
            "analysis_pending",
            "pending",
            1,
        )
        assert body["detail"] == (
            f"The analysis of API sweep (trial version 1) is not ready: job #{body['job']['id']} "
            "is computing it. Try again when it has finished."
        )
        assert body["job"]["kind"] == "qualification_analysis"
        assert not QualificationAnalysis.objects.exists() and not OperatingLimit.objects.exists()
    created = editor.post("/api/v1/operating-limits/", {"qualification": qid}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["max_context_tokens"] == 16000


def test_bad_json_trials_are_400_with_positions_and_nothing_saved(
    api_for, api_qualification, planted_rows
):
    rows = jsonable(planted_rows)
    rows[4]["input_tokens"] = -1
    rows[7]["family"] = "retreival"
    url = f"/api/v1/qualifications/{api_qualification['id']}/trials/"
    response = api_for("editor").post(url, rows, format="json")
    assert response.status_code == 400
    body = response.json()
    assert "nothing was saved" in body["detail"]
    lines = {(e["line"], e["error"].split(":")[0]) for e in body["errors"]}
    assert (5, "input_tokens") in lines and (8, "family") in lines
    assert Trial.objects.count() == 0


def test_csv_file_goes_through_a_job(api_for, api_qualification, planted_rows, run_on_commit):
    url = f"/api/v1/qualifications/{api_qualification['id']}/trials/"
    upload = SimpleUploadedFile("sweep.csv", to_csv(planted_rows), content_type="text/csv")
    with run_on_commit():
        response = api_for("editor").post(url, {"file": upload}, format="multipart")
    assert response.status_code == 202
    assert response.json()["status"] == "pending"  # queued; the worker loads it
    job = Job.objects.get(pk=response.json()["job"]["id"])
    assert (job.kind, job.status, job.progress_done, job.progress_total) == (
        "trial_upload",
        "succeeded",
        2000,
        2000,
    )
    assert Trial.objects.count() == 2000


def test_raw_csv_body_with_a_bad_line_reports_the_file_line(
    api_for, api_qualification, planted_rows, run_on_commit
):
    rows = [dict(r) for r in planted_rows]
    rows[2]["repeat"] = "two"
    url = f"/api/v1/qualifications/{api_qualification['id']}/trials/"
    with run_on_commit():
        response = api_for("editor").generic("POST", url, to_csv(rows), content_type="text/csv")
    assert response.status_code == 202
    job = Job.objects.get(kind="trial_upload")
    assert job.status == "failed"
    assert job.errors[0] == {
        "file": "trials.csv",
        "line": 4,
        "error": "repeat: repeat must be a whole number, got 'two'",
    }


def _loaded(api_for, api_qualification, planted_rows, run_on_commit):
    with run_on_commit():
        api_for("editor").post(
            f"/api/v1/qualifications/{api_qualification['id']}/trials/",
            jsonable(planted_rows),
            format="json",
        )


def test_operating_limit_lifecycle_over_the_api(
    api_for, api_qualification, planted_rows, run_on_commit
):
    _loaded(api_for, api_qualification, planted_rows, run_on_commit)
    editor, reviewer = api_for("editor"), api_for("reviewer")
    response = editor.post(
        "/api/v1/operating-limits/",
        {"qualification": api_qualification["id"], "reserve_action": "restart_from_spec",
         "source_limits": {"system": 2000, "retrieved_files": 6000}, "use_stage_template": True},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.json()
    limit = response.json()
    assert limit["status"] == "proposed" and limit["max_context_tokens"] == 16000
    assert len(limit["stage_budgets"]) == 5
    assert limit["requalification"]["due"] is False

    # Editors cannot approve; the proposer cannot either, even with the role.
    assert editor.post(f"/api/v1/operating-limits/{limit['id']}/approve/").status_code == 403
    patch = reviewer.patch(
        f"/api/v1/operating-limits/{limit['id']}/", {"rationale": "checked"}, format="json"
    )
    assert patch.status_code == 200
    denied = reviewer.post(f"/api/v1/operating-limits/{limit['id']}/approve/")
    assert denied.status_code == 403 and "another reviewer" in denied.json()["detail"]
    approved = api_for("admin").post(
        f"/api/v1/operating-limits/{limit['id']}/approve/", {"confirm": True}, format="json"
    )
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    frozen = editor.patch(
        f"/api/v1/operating-limits/{limit['id']}/", {"reserve_tokens": 1}, format="json"
    )
    assert frozen.status_code == 409 and "immutable" in frozen.json()["detail"]

    check = editor.post(
        "/api/v1/budget-checks/",
        {"operating_limit": limit["id"], "allocation": {"system": 1500, "retrieved_files": 7000},
         "assembled_prompt": "You are an agent.", "omissions": [{"decision": "omitted", "item": "yarn.lock", "tokens": 9000}],
         "run_ref": "r-1"},
        format="json",
    )  # fmt: skip
    assert check.status_code == 201, check.json()
    verdict = check.json()
    assert {k: verdict[k] for k in ("verdict", "total", "limit", "reserve_left", "action")} == {
        "verdict": "over", "total": 8500, "limit": 12000, "reserve_left": 7500, "action": "restart_from_spec",
    }  # fmt: skip
    assert verdict["over_sources"] == [{"source": "retrieved_files", "tokens": 7000, "limit": 6000}]
    staged = editor.post(
        "/api/v1/budget-checks/",
        {"operating_limit": limit["id"], "stage": "ticket_parsing", "allocation": {"system": 1500}},
        format="json",
    ).json()
    assert (staged["verdict"], staged["limit"], staged["action"]) == ("within", 4000, "proceed")
    bad_stage = editor.post(
        "/api/v1/budget-checks/",
        {"operating_limit": limit["id"], "stage": "deploy", "allocation": {"system": 1}},
        format="json",
    )
    assert bad_stage.status_code == 400 and "unknown stage 'deploy'" in bad_stage.json()["detail"]
    detail = editor.get(f"/api/v1/budget-checks/{verdict['id']}/").json()
    assert detail["assembled_prompt"] == "You are an agent."
    assert AssemblyAudit.objects.count() == 2


def test_budget_check_against_a_proposed_limit_is_409(
    api_for, api_qualification, planted_rows, run_on_commit
):
    _loaded(api_for, api_qualification, planted_rows, run_on_commit)
    limit = (
        api_for("editor")
        .post(
            "/api/v1/operating-limits/", {"qualification": api_qualification["id"]}, format="json"
        )
        .json()
    )
    response = api_for("editor").post(
        "/api/v1/budget-checks/",
        {"operating_limit": limit["id"], "allocation": {"system": 1}},
        format="json",
    )
    assert response.status_code == 409


def test_another_workspaces_objects_are_404(
    api_for, api_qualification, planted_rows, run_on_commit, outsider, other_workspace
):
    from rest_framework.test import APIClient

    from governance.services import api_token_create

    _loaded(api_for, api_qualification, planted_rows, run_on_commit)
    limit = (
        api_for("editor")
        .post(
            "/api/v1/operating-limits/", {"qualification": api_qualification["id"]}, format="json"
        )
        .json()
    )
    stranger = APIClient()
    stranger.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(workspace=other_workspace, user=outsider).plaintext}"
    )
    qid = api_qualification["id"]
    for method, url, body in [
        ("get", f"/api/v1/qualifications/{qid}/", None),
        ("get", f"/api/v1/qualifications/{qid}/results/", None),
        ("get", f"/api/v1/qualifications/{qid}/trials/", None),
        ("post", f"/api/v1/qualifications/{qid}/trials/", []),
        ("get", f"/api/v1/operating-limits/{limit['id']}/", None),
        ("post", f"/api/v1/operating-limits/{limit['id']}/approve/", None),
        ("post", "/api/v1/operating-limits/", {"qualification": qid}),
        (
            "post",
            "/api/v1/budget-checks/",
            {"operating_limit": limit["id"], "allocation": {"a": 1}},
        ),
    ]:
        response = getattr(stranger, method)(url, body, format="json")
        assert response.status_code == 404, (url, response.status_code)
    assert stranger.get("/api/v1/qualifications/").json()["count"] == 0


def test_schema_documents_the_endpoints(api_for):
    schema = api_for("viewer").get("/api/schema/?format=json").json()
    for path in ("/api/v1/qualifications/", "/api/v1/qualifications/{id}/trials/",
                 "/api/v1/qualifications/{id}/results/", "/api/v1/operating-limits/{id}/approve/",
                 "/api/v1/budget-checks/"):  # fmt: skip
        assert path in schema["paths"], path
    assert "verdict" in schema["paths"]["/api/v1/budget-checks/"]["post"]["description"]
