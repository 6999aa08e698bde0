"""The traces API: uploads answer 202 with a job, sessions with filters, calls in order, isolation."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.traces.factories import claude_assistant, claude_boundary, claude_session, claude_user
from traces.models import Session

pytestmark = pytest.mark.django_db


def upload(api, name, data, **extra):
    return api.post(
        "/api/v1/trace-uploads/",
        {"files": [SimpleUploadedFile(name, data)], **extra},
        format="multipart",
    )


def transcript(n=5, session="sess-api"):
    return ("\n".join(claude_session(n, session=session)) + "\n").encode()


def test_upload_answers_202_with_the_job_and_ingests(api_for, run_on_commit, shared_fixtures):
    api = api_for("editor")
    data = (
        shared_fixtures
        / "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    ).read_bytes()
    with run_on_commit():
        response = upload(api, "fe5e1c67.jsonl", data)
    assert response.status_code == 202
    body = response.json()
    assert body["job_url"].endswith(f"/api/v1/ingest-jobs/{body['job']['id']}/")
    assert response["Location"] == body["job_url"]
    job = api.get(f"/api/v1/ingest-jobs/{body['job']['id']}/").json()
    assert job["status"] == "succeeded"
    assert job["counts"]["calls"] == 170 and job["counts"]["duplicates_dropped"] == 92
    assert (
        job["progress_done"] == job["progress_total"] == len(data)
        and job["progress_unit"] == "bytes"
    )


def test_several_files_in_one_upload_and_a_bad_one(api_for, run_on_commit):
    api = api_for("editor")
    files = [
        SimpleUploadedFile("a.jsonl", transcript(3, "sess-a")),
        SimpleUploadedFile("b.jsonl", b"{broken\n" + transcript(2, "sess-b")),
        SimpleUploadedFile("c.bin", bytes(range(256))),
    ]
    with run_on_commit():
        response = api.post("/api/v1/trace-uploads/", {"files": files}, format="multipart")
    job = api.get(response.json()["job_url"]).json()
    assert job["status"] == "succeeded"
    assert job["counts"]["calls"] == 5 and job["counts"]["malformed_lines"] == 1
    assert {(e["file"], e["line"]) for e in job["errors"]} == {("b.jsonl", 1), ("c.bin", 1)}


def test_upload_needs_files_and_the_editor_role(api_for):
    assert (
        api_for("editor").post("/api/v1/trace-uploads/", {}, format="multipart").status_code == 400
    )
    assert upload(api_for("viewer"), "a.jsonl", transcript()).status_code == 403


def test_upload_over_the_limit_is_413(api_for, settings):
    settings.GOVERNANCE_MAX_UPLOAD_BYTES = 1000
    response = upload(api_for("editor"), "big.jsonl", transcript(20))
    assert response.status_code == 413
    assert "limit is 1,000 bytes" in response.json()["detail"]


def test_too_many_files_in_one_request_is_a_400_with_a_message(api_for, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    files = [SimpleUploadedFile(f"s{i}.jsonl", transcript()) for i in range(3)]
    response = api_for("editor").post(
        "/api/v1/trace-uploads/", {"files": files}, format="multipart"
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("More than 2 files in one upload.")


def test_sessions_list_filters_and_shape(api_for, run_on_commit, shared_fixtures):
    api = api_for("editor")
    with run_on_commit():
        upload(
            api,
            "alpha.jsonl",
            (shared_fixtures / "ryoppippi__ccusage__claude-project-alpha-chat.jsonl").read_bytes(),
        )
        upload(
            api,
            "rollout-2026-05-13T09-00-00-019c0000-0000-7000-8000-000000000abc.jsonl",
            (shared_fixtures / "ryoppippi__ccusage__codex-session-alpha.jsonl").read_bytes(),
        )
    listing = api.get("/api/v1/sessions/").json()
    assert listing["count"] == 2
    alpha = next(s for s in listing["results"] if s["harness"] == "claude-code")
    assert alpha["tokens"] == {"input": 600, "cache_creation": 75, "cache_read": 70, "output": 250}
    assert (alpha["calls"], alpha["agents"], alpha["compactions"], alpha["max_context"]) == (
        3,
        1,
        0,
        340,
    )
    assert set(alpha) >= {
        "id",
        "external_id",
        "harness",
        "agents",
        "calls",
        "compactions",
        "tokens",
        "max_context",
    }
    assert [s["harness"] for s in api.get("/api/v1/sessions/?harness=codex").json()["results"]] == [
        "codex"
    ]
    opus = next(m for item in listing["results"] for m in item["models"] if "opus" in m.lower())
    assert api.get("/api/v1/sessions/", {"model": opus}).json()["count"] == 1
    assert api.get("/api/v1/sessions/?started_after=2026-05-01").json()["count"] == 1
    assert api.get("/api/v1/sessions/?started_before=2026-01-09").json()["count"] == 1
    assert api.get("/api/v1/sessions/?started_after=not-a-date").status_code == 400


def test_calls_in_order_compactions_runs_and_agents(api_for, run_on_commit):
    api = api_for("viewer")
    editor = api_for("editor")
    lines = [claude_assistant(f"m{i}", f"r{i}", t=i, cr=50_000 + i * 1000) for i in range(4)]
    lines += [
        claude_boundary(t=10, pre=53_205),
        claude_user("summary", t=11, isCompactSummary=True),
    ]
    lines += [claude_assistant(f"n{i}", f"q{i}", t=20 + i, cr=9_000 + i * 1000) for i in range(3)]
    with run_on_commit():
        upload(editor, "s.jsonl", ("\n".join(lines)).encode())
    session = Session.objects.get()
    calls = api.get(f"/api/v1/sessions/{session.pk}/calls/").json()
    assert [c["call_index"] for c in calls["results"]] == list(range(7))
    assert calls["results"][0]["key"] == "m0:r0" and calls["results"][0]["context_tokens"] == 50_105
    compactions = api.get(f"/api/v1/sessions/{session.pk}/compactions/").json()
    assert [
        (c["pre_tokens"], c["post_tokens"], c["before_call_index"], c["after_call_index"])
        for c in compactions
    ] == [(53_205, 9_105, 3, 4)]
    runs = api.get(f"/api/v1/sessions/{session.pk}/runs/").json()
    assert [(r["index"], r["call_count"], r["max_context"]) for r in runs] == [
        (0, 4, 53_105),
        (1, 3, 11_105),
    ]
    assert api.get(f"/api/v1/sessions/{session.pk}/").json()["compactions"] == 1


def test_other_workspace_sessions_are_404(api_for, run_on_commit, other_workspace, outsider):
    from rest_framework.test import APIClient

    from governance.services import api_token_create

    with run_on_commit():
        upload(api_for("editor"), "s.jsonl", transcript())
    session = Session.objects.get()
    intruder = APIClient()
    intruder.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(workspace=other_workspace, user=outsider).plaintext}"
    )
    for path in ["", "calls/", "compactions/", "runs/", "agents/"]:
        assert intruder.get(f"/api/v1/sessions/{session.pk}/{path}").status_code == 404
    assert intruder.get("/api/v1/sessions/").json()["count"] == 0
    job_id = api_for("viewer").get("/api/v1/ingest-jobs/").json()["results"][0]["id"]
    assert intruder.get(f"/api/v1/ingest-jobs/{job_id}/").status_code == 404


def test_cli_json_summary(tmp_path, workspace, shared_fixtures):
    from django.core.management import call_command

    out = io.StringIO()
    call_command(
        "ingest_traces",
        str(
            shared_fixtures
            / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
        ),
        "--workspace",
        workspace.slug,
        "--json",
        stdout=out,
    )
    import json

    summary = json.loads(out.getvalue())
    assert list(summary) == [
        "files",
        "sessions",
        "agents",
        "calls",
        "duplicates_dropped",
        "malformed_lines",
        "compactions",
        "tokens",
        "errors",
    ]
    assert (
        summary["files"],
        summary["sessions"],
        summary["agents"],
        summary["calls"],
        summary["duplicates_dropped"],
    ) == (1, 1, 3, 20, 8)
    assert set(summary["tokens"]) == {"input", "cache_creation", "cache_read", "output"}
    again = io.StringIO()
    call_command(
        "ingest_traces",
        str(
            shared_fixtures
            / "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
        ),
        "--workspace",
        workspace.slug,
        "--json",
        stdout=again,
    )
    assert json.loads(again.getvalue())["calls"] == 0


# (query, indices into the named_sessions fixture that match it)
TEXT_FILTER_CASES = [
    ("project=web_app", [0]),  # any case; "_" is literal, so web-app does not match
    ("project=WEB-APP", [1]),
    ("project=100%25", [2]),  # "%" is literal: 100x-done does not match
    ("project=%5Cdev", [3]),  # the escape character itself is literal
    # The model is chosen whole (any case): tests/analytics/test_model_filter.py has the rest.
    ("model=CLAUDE-opus-4-1", [0, 2]),
    ("model=claude-sonnet-4-5", [1, 3]),
]


@pytest.mark.parametrize(
    ("query", "matches"), TEXT_FILTER_CASES, ids=[q for q, _ in TEXT_FILTER_CASES]
)
def test_text_filters_are_case_insensitive_and_literal(api_for, named_sessions, query, matches):
    """The same answers on SQLite and PostgreSQL (run with and without DATABASE_URL)."""
    body = api_for("viewer").get(f"/api/v1/sessions/?{query}").json()
    assert sorted(s["id"] for s in body["results"]) == sorted(named_sessions[i].pk for i in matches)


def test_the_model_filter_reads_the_models_kept_per_session(api_for, named_sessions):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    assert named_sessions[0].model_names == ["claude-Opus-4-1"]
    api = api_for("viewer")
    with CaptureQueriesContext(connection) as queries:
        body = api.get("/api/v1/sessions/?model=claude-Opus-4-1").json()
    assert sorted(s["id"] for s in body["results"]) == [named_sessions[0].pk, named_sessions[2].pk]
    sessions_sql = [q["sql"] for q in queries if "traces_session" in q["sql"]]
    assert sessions_sql and not [sql for sql in sessions_sql if "traces_call" in sql]
    for part in ("opus", "gpt", "opus-4_1", "100%"):  # not a whole model name: 400, not []
        assert api.get("/api/v1/sessions/", {"model": part}).status_code == 400
