"""Trace pages: upload form, sessions list, session detail, escaping, isolation."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from governance.models import Job
from tests.traces.factories import claude_assistant, claude_session
from traces.models import Session

pytestmark = pytest.mark.django_db


def test_upload_page_ingests_and_lists_the_job(client_for, workspace, run_on_commit):
    client = client_for("editor")
    page = client.get(f"/w/{workspace.slug}/traces/upload/")
    assert page.status_code == 200 and b"Upload and ingest" in page.content
    data = ("\n".join(claude_session(4)) + "\n").encode()
    with run_on_commit():
        response = client.post(
            f"/w/{workspace.slug}/traces/upload/",
            {"files": [SimpleUploadedFile("s.jsonl", data)], "format": "auto"},
        )
    assert response.status_code == 302
    listing = client.get(f"/w/{workspace.slug}/traces/upload/").content.decode()
    assert "Ingest s.jsonl" in listing and "succeeded" in listing


def test_upload_form_validates_inline(client_for, workspace, settings):
    client = client_for("editor")
    empty = client.post(f"/w/{workspace.slug}/traces/upload/", {"format": "auto"})
    assert empty.status_code == 400 and b"This field is required" in empty.content
    settings.GOVERNANCE_MAX_UPLOAD_BYTES = 10
    big = client.post(
        f"/w/{workspace.slug}/traces/upload/",
        {"files": [SimpleUploadedFile("s.jsonl", b"x" * 500)], "format": "auto"},
    )
    assert big.status_code == 413 and b"the limit is 10 bytes" in big.content


def test_too_many_files_in_one_upload_gets_a_message(members, workspace, settings):
    # With the CSRF check on, as in a browser: that check parses the body before any view.
    client = Client(enforce_csrf_checks=True)
    client.force_login(members["editor"])
    page = f"/w/{workspace.slug}/traces/upload/"
    client.get(page)
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 3
    files = [SimpleUploadedFile(f"s{i}.jsonl", b"{}\n") for i in range(4)]
    token = client.cookies["csrftoken"].value
    response = client.post(page, {"files": files, "format": "auto", "csrfmiddlewaretoken": token})
    assert response.status_code == 303 and response["Location"] == page
    shown = client.get(page).content
    assert b"More than 3 files in one upload. Upload a .zip or .tar.gz" in shown
    assert Job.objects.filter(workspace=workspace).count() == 0


def test_viewers_cannot_upload(client_for, workspace):
    assert client_for("viewer").post(f"/w/{workspace.slug}/traces/upload/", {}).status_code == 403


def test_sessions_list_sorts_filters_and_paginates(client_for, workspace, ingest, tmp_path):
    for n in range(3):
        path = tmp_path / f"s{n}.jsonl"
        path.write_text("\n".join(claude_session(2 + n, session=f"sess-{n}")) + "\n")
        ingest(path)
    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/traces/?sort=-calls").content.decode()
    assert page.index("sess-2") < page.index("sess-1") < page.index("sess-0")
    fragment = client.get(
        f"/w/{workspace.slug}/traces/?q=sess-1", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "<html" not in fragment and "sess-1" in fragment and "sess-2" not in fragment
    none = client.get(f"/w/{workspace.slug}/traces/?q=nothing-like-this").content.decode()
    assert "No session matches these filters" in none


def test_session_detail_escapes_transcript_text(client_for, workspace, ingest, tmp_path):
    path = tmp_path / "x.jsonl"
    line = claude_assistant("m1", "r1", session="<script>alert(1)</script>")
    path.write_text(
        line + "\n" + '{"type":"summary","summary":"<img src=x onerror=alert(2)>","leafUuid":"u"}\n'
    )
    ingest(path)
    session = Session.objects.get()
    page = (
        client_for("viewer")
        .get(f"/w/{workspace.slug}/traces/sessions/{session.pk}/")
        .content.decode()
    )
    assert (
        "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    )
    assert 'id="context-timeline"' in page and "n = 1 deduplicated calls" in page


def test_session_detail_shows_runs_compactions_and_pages_calls(
    client_for, workspace, ingest, tmp_path
):
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(claude_session(150)) + "\n")
    ingest(path)
    session = Session.objects.get()
    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/traces/sessions/{session.pk}/").content.decode()
    assert "Calls 1–100 of 150" in page and "code understanding" in page
    viewer = f"/w/{workspace.slug}/annotations/sessions/{session.pk}/"
    run = session.runs.order_by("agent_id", "index").first()
    assert f'href="{viewer}"' in page
    assert f'href="{viewer}runs/{run.pk}/"' in page
    assert f'href="{viewer}agents/{run.agent_id}/"' in page
    second = client.get(
        f"/w/{workspace.slug}/traces/sessions/{session.pk}/?page=2", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Calls 101–150 of 150" in second and "<html" not in second


def test_session_of_another_workspace_is_404(
    client_for, other_workspace, ingest, tmp_path, workspace
):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(claude_session(2)) + "\n")
    ingest(path, target=other_workspace)
    session = Session.objects.get()
    assert (
        client_for("admin").get(f"/w/{workspace.slug}/traces/sessions/{session.pk}/").status_code
        == 404
    )
    assert (
        client_for("admin")
        .get(f"/w/{other_workspace.slug}/traces/sessions/{session.pk}/")
        .status_code
        == 404
    )


def test_task_type_rules_page(client_for, workspace):
    page = client_for("viewer").get(f"/w/{workspace.slug}/traces/task-types/").content.decode()
    assert "driving a PR to merge" in page and "at least 2 PR calls" in page


def test_a_subagent_description_is_plain_text_in_the_timeline(
    client_for, workspace, ingest, tmp_path
):
    import json
    import re

    root = tmp_path / "sess-x"
    (root / "subagents").mkdir(parents=True)
    (tmp_path / "sess-x.jsonl").write_text("\n".join(claude_session(3, session="sess-x")) + "\n")
    (root / "subagents" / "agent-q.jsonl").write_text(
        claude_assistant("q1", "rq1", t=15, session="sess-x", sidechain=True, agentId="q") + "\n"
    )
    hostile = '<a href="https://evil.example">click</a> %{y}'
    (root / "subagents" / "agent-q.meta.json").write_text(json.dumps({"description": hostile}))
    ingest(tmp_path)
    session = Session.objects.get(external_id="sess-x")
    page = client_for("viewer").get(f"/w/{workspace.slug}/traces/sessions/{session.pk}/")
    data = re.search(
        r'<script id="context-timeline-data" type="application/json">(.*?)</script>',
        page.content.decode(),
        re.S,
    ).group(1)
    traces = json.loads(data)["data"]
    names = [t["name"] for t in traces]
    assert '&lt;a href="https://evil.example"&gt;click&lt;/a&gt; %{y}' in names
    assert all("evil" not in t.get("hovertemplate", "") for t in traces)
    assert "<extra>%{fullData.name}</extra>" in traces[0]["hovertemplate"]


def test_the_sessions_page_filters_text_case_insensitively_and_literally(
    client_for, workspace, named_sessions
):
    client = client_for("viewer")
    # The model is chosen whole, in any case (tests/analytics/test_model_filter.py).
    page = client.get(
        f"/w/{workspace.slug}/traces/?project=web_app&model=CLAUDE-opus-4-1"
    ).content.decode()
    assert named_sessions[0].external_id[:12] in page
    assert all(s.external_id[:12] not in page for s in named_sessions[1:])
    page = client.get(f"/w/{workspace.slug}/traces/?project=100%25").content.decode()
    shown = [s for s in named_sessions if s.external_id[:12] in page]
    assert shown == [named_sessions[2]]
