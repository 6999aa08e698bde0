"""Artifact pages without a browser: scoping, htmx regions, the full load, deletion, demo data,
the OpenAPI schema, and a browser-session upload through the API (CSRF parses the form first).
"""

import io
import re

import pytest
import requests

from artifacts import demo, services
from artifacts.models import Artifact, ArtifactRead, ArtifactWriteFailure
from tests.artifacts.conftest import artifact_files, stored_bytes
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def page(workspace, artifact=None, suffix=""):
    base = f"/w/{workspace.slug}/artifacts/"
    return f"{base}{artifact.pk}/{suffix}" if artifact else base


def test_outsiders_and_other_workspaces_get_404(client_for, store, workspace, outsider):
    from django.test import Client

    artifact = store(b"x\n")
    client = Client()
    client.force_login(outsider)
    assert client.get(page(workspace)).status_code == 404
    assert client.get(page(workspace, artifact)).status_code == 404
    assert client.get(page(workspace, artifact, "content/")).status_code == 404
    assert client.post(page(workspace, artifact, "delete/")).status_code == 404
    assert Artifact.objects.get().state == "available"


def test_htmx_read_renders_the_viewer_and_the_read_log_out_of_band(client_for, store, workspace):
    artifact = store(b"alpha\nbeta <b>bold</b>\ngamma\n")
    response = client_for("viewer").get(
        page(workspace, artifact), {"view": "search", "q": "<b>"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert 'id="viewer"' in html and 'hx-swap-oob="true"' in html
    assert "<mark>&lt;b&gt;</mark>bold&lt;/b&gt;" in html
    assert "<b>bold" not in html
    assert ArtifactRead.objects.get().mode == "search"


def test_page_read_over_a_limit_explains_itself(client_for, store, workspace):
    services.artifact_policy_update(workspace=workspace, actor=None, max_read_lines=10)
    artifact = store(b"line\n" * 100)
    response = client_for("viewer").get(page(workspace, artifact), {"view": "tail", "lines": 50})
    assert response.status_code == 400
    assert "max_read_lines limit (10)" in response.content.decode()
    assert ArtifactRead.objects.count() == 0


def test_full_content_page_streams_or_refuses(client_for, store, workspace):
    artifact = store(b"all of it\n")
    response = client_for("viewer").get(page(workspace, artifact, "content/"), {"download": 1})
    assert b"".join(response.streaming_content) == b"all of it\n"
    assert response["Content-Disposition"].startswith("attachment;")
    assert ArtifactRead.objects.get().via == "page"
    services.artifact_policy_update(workspace=workspace, actor=None, max_content_bytes=5)
    refused = client_for("viewer").get(page(workspace, artifact, "content/"))
    assert refused.status_code == 400
    assert "max_content_bytes" in refused.content.decode()


def test_delete_from_the_page_needs_an_editor(client_for, store, workspace):
    artifact = store(b"x\n")
    assert client_for("viewer").post(page(workspace, artifact, "delete/")).status_code == 403
    response = client_for("editor").post(
        page(workspace, artifact, "delete/"), {"reason": "personal data."}
    )
    assert response.status_code == 302
    artifact.refresh_from_db()
    assert (artifact.state, artifact.delete_reason) == ("deleted", "personal data.")
    tombstone = client_for("viewer").get(page(workspace, artifact))
    assert tombstone.status_code == 410
    assert "by editor-a: personal data.</" in tombstone.content.decode()


def test_list_page_filters_and_sorts(client_for, store, workspace):
    store(b"a\n", run_id="run-1", command="pytest -q")
    store(b"bb\n" * 100, run_id="run-2", command="make build")
    client = client_for("viewer")
    html = client.get(page(workspace), {"run_id": "run-2"}).content.decode()
    assert "make build" in html and "pytest -q" not in html
    html = client.get(page(workspace), {"sort": "-bytes"}).content.decode()
    assert html.index("make build") < html.index("pytest -q")
    region = client.get(page(workspace), {"command": "pytest"}, HTTP_HX_REQUEST="true")
    assert region.content.decode().lstrip().startswith('<div id="results">')


def test_dashboard_card(client_for, store, workspace):
    html = client_for("viewer").get(f"/w/{workspace.slug}/").content.decode()
    assert "No bulk output stored yet" in html
    store(b"x" * 4000)
    html = client_for("viewer").get(f"/w/{workspace.slug}/").content.decode()
    assert re.search(r"<dt>Est\. tokens</dt><dd>1k</dd>", html)


def test_demo_seed_is_idempotent_and_realistic(workspace, members):
    users = {"editor": members["editor"], "admin": members["admin"]}
    demo.seed(workspace=workspace, users=users, stdout=io.StringIO())
    first = sorted(Artifact.objects.values_list("pk", flat=True))
    demo.seed(workspace=workspace, users=users, stdout=io.StringIO())
    assert sorted(Artifact.objects.values_list("pk", flat=True)) == first
    by_call = {(a.run_id, a.tool_call_id): a for a in Artifact.objects.all()}
    log = by_call[(demo.RUN, "call-pytest-1")]
    assert log.line_count > 18000 and log.exit_status == 1
    build = by_call[(demo.RUN, "call-build-2")]
    assert build.redaction_count == 4
    assert b"wJalrXUtnFEMI" not in stored_bytes(build)
    assert not by_call[(demo.RUN, "call-rg-3")].complete
    assert by_call[(demo.OLD_RUN, "call-pytest-1")].state == "expired"
    assert by_call[(demo.OLD_RUN, "call-env-2")].state == "deleted"
    assert ArtifactWriteFailure.objects.count() == 1
    assert ArtifactRead.objects.filter(artifact=log).count() == 2


def test_openapi_schema_documents_the_artifact_endpoints(client_for):
    schema = client_for("viewer").get("/api/schema/?format=json").json()
    paths = schema["paths"]
    for action in ("tail", "head", "range", "search", "content", "reads"):
        assert f"/api/v1/artifacts/{{id}}/{action}/" in paths
    create = paths["/api/v1/artifacts/"]["post"]
    headers = {p["name"] for p in create["parameters"] if p["in"] == "header"}
    assert {"X-Run-Id", "X-Command", "X-Complete", "X-Started-At"} <= headers
    assert "multipart/form-data" in create["requestBody"]["content"]
    assert "410" in paths["/api/v1/artifacts/{id}/tail/"]["get"]["responses"]
    for action in ("tail", "head", "range", "search", "content"):
        refused = paths[f"/api/v1/artifacts/{{id}}/{action}/"]["get"]["responses"]["400"]
        assert refused["content"]["application/json"]["schema"]["$ref"].endswith("/ReadLimit")
    limit = schema["components"]["schemas"]["ReadLimit"]["properties"]
    assert (limit["limit"]["type"], limit["allowed"]["type"]) == ("string", "integer")


@pytest.mark.django_db(transaction=True)
def test_session_upload_through_the_api_with_csrf(live_server, members, workspace):
    """With a browser session, Django's CSRF check parses the form before DRF has resolved
    the workspace; the upload still streams through redaction into exactly one artifact."""
    session = requests.Session()
    login = session.get(f"{live_server.url}/accounts/login/", timeout=20)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    session.post(
        f"{live_server.url}/accounts/login/",
        data={"username": "editor-a", "password": PASSWORD, "csrfmiddlewaretoken": token},
        timeout=20,
    )
    headers = {"X-CSRFToken": session.cookies["csrftoken"], "X-Workspace": workspace.slug}
    body = b"deploy ok\nexport TOKEN=ghp_" + b"a1B2" * 9 + b"\n"
    response = session.post(
        f"{live_server.url}/api/v1/artifacts/",
        files={"file": ("deploy.log", body)},
        data={"run_id": "run-s", "command": "deploy"},
        headers=headers,
        timeout=20,
    )
    assert response.status_code == 201, response.text
    artifact = Artifact.objects.get()
    assert artifact.redaction_count == 1
    assert stored_bytes(artifact) == b"deploy ok\nexport TOKEN=[REDACTED:github_token]\n"
    no_csrf = session.post(
        f"{live_server.url}/api/v1/artifacts/",
        files={"file": ("x.log", b"x")},
        data={"run_id": "run-s", "command": "x"},
        headers={"X-Workspace": workspace.slug},
        timeout=20,
    )
    assert no_csrf.status_code == 403
    assert Artifact.objects.count() == 1
    assert [p for p in artifact_files() if p.suffix == ".part"] == []


def test_deleting_an_artifact_already_gone_flashes_why_on_the_tombstone(
    client_for, store, workspace
):
    artifact = store(b"x\n")
    editor = client_for("editor")
    editor.post(page(workspace, artifact, "delete/"), {"reason": "personal data."})
    again = editor.post(page(workspace, artifact, "delete/"), {"reason": "twice"}, follow=True)
    assert again.redirect_chain[-1][0].endswith(f"/artifacts/{artifact.pk}/")
    assert again.status_code == 410  # the tombstone page, through the one page mapping
    html = again.content.decode()
    assert html.count("This artifact was deleted on") >= 2  # the flash and the tombstone
    artifact.refresh_from_db()
    assert artifact.delete_reason == "personal data."
