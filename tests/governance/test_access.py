"""Login on every page, workspace isolation for every role, and role checks on the server."""

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from governance.models import Job, Role
from governance.services import audit_record, job_create

pytestmark = pytest.mark.django_db


def iter_page_routes(patterns=None, prefix=""):
    """Every routed page (not the API, admin or auth), as a path template."""
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from iter_page_routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            yield route


def concrete(route: str, workspace_slug: str) -> str:
    path = route.replace("<slug:workspace>", workspace_slug)
    for converter in (
        "<int:pk>",
        "<int:id>",
        "<int:version_pk>",
        "<int:session_pk>",
        "<int:agent_pk>",
        "<int:run_pk>",
        "<int:call_index>",
    ):
        path = path.replace(converter, "999999")
    path = path.replace("<str:pk>", "abc").replace(
        "<uuid:pk>", "00000000-0000-0000-0000-000000000000"
    )
    path = path.replace("<slug:slug>", "nothing").replace("<str:format>", "json")
    return "/" + path.lstrip("^").rstrip("$")


PUBLIC = {"/accounts/login/", "/healthz"}


def test_every_page_needs_a_login(workspace):
    anonymous = Client()
    checked = 0
    for route in iter_page_routes():
        path = concrete(route, workspace.slug)
        if path.startswith(("/api/", "/v1/", "/admin/")) or "<" in path or path in PUBLIC:
            continue
        response = anonymous.get(path)
        assert response.status_code == 302, (path, response.status_code)
        assert response["Location"].startswith("/accounts/login/?next="), path
        checked += 1
    assert checked >= 8


def test_login_page_and_healthz_are_public(db):
    anonymous = Client()
    assert anonymous.get("/accounts/login/").status_code == 200
    health = anonymous.get("/healthz")
    assert health.status_code == 200 and health.json() == {"status": "ok", "database": "up"}


def test_expired_session_explains_and_wrong_password_says_so(members):
    anonymous = Client()
    page = anonymous.get("/accounts/login/?next=/w/team-a/")
    assert b"your session has expired" in page.content
    wrong = anonymous.post("/accounts/login/", {"username": "admin-a", "password": "nope"})
    assert wrong.status_code == 200
    assert b"That username and password do not match" in wrong.content
    assert "_auth_user_id" not in anonymous.session


@pytest.mark.parametrize("role", ["viewer", "editor", "reviewer", "admin"])
def test_other_workspace_is_404_on_pages(role, workspace, other_workspace, client_for, outsider):
    foreign_job = job_create(workspace=other_workspace, kind="probe", label="secret job")
    own_job = job_create(workspace=workspace, kind="probe", label="own job")
    client = client_for(role)
    assert client.get(f"/w/{workspace.slug}/").status_code == 200
    assert client.get(f"/w/{workspace.slug}/jobs/{own_job.pk}/").status_code == 200
    for path in [
        f"/w/{other_workspace.slug}/",
        f"/w/{other_workspace.slug}/jobs/{foreign_job.pk}/",
        f"/w/{workspace.slug}/jobs/{foreign_job.pk}/",
        "/w/no-such-workspace/",
    ]:
        response = client.get(path)
        assert response.status_code == 404, path
        assert b"secret job" not in response.content
    listing = client.get(f"/w/{workspace.slug}/jobs/")
    assert b"own job" in listing.content and b"secret job" not in listing.content


@pytest.mark.parametrize("role", ["viewer", "editor", "reviewer", "admin"])
def test_other_workspace_is_404_in_the_api(role, workspace, other_workspace, api_for, outsider):
    foreign_job = job_create(workspace=other_workspace, kind="probe", label="secret job")
    audit_record(workspace=other_workspace, actor=outsider, action="secret.action", obj=foreign_job)
    own_job = job_create(workspace=workspace, kind="probe", label="own job")
    api = api_for(role)
    assert api.get(f"/api/v1/jobs/{own_job.pk}/").status_code == 200
    response = api.get(f"/api/v1/jobs/{foreign_job.pk}/")
    assert response.status_code == 404
    assert "secret" not in response.content.decode()
    listed = api.get("/api/v1/jobs/").json()
    assert [item["label"] for item in listed["results"]] == ["own job"]
    events = api.get("/api/v1/audit-events/").json()["results"]
    assert all(e["action"] != "secret.action" for e in events)
    # A token is bound to its workspace: naming another one does not switch.
    assert (
        api.get("/api/v1/workspace/", HTTP_X_WORKSPACE=other_workspace.slug).json()["workspace"][
            "slug"
        ]
        == workspace.slug
    )


def test_session_api_picks_workspace_by_header_and_404s_on_foreign(
    members, workspace, other_workspace, outsider
):
    client = Client()
    client.force_login(members["viewer"])
    assert (
        client.get("/api/v1/workspace/", HTTP_X_WORKSPACE=workspace.slug).json()["role"] == "viewer"
    )
    assert (
        client.get("/api/v1/workspace/", HTTP_X_WORKSPACE=other_workspace.slug).status_code == 404
    )
    assert client.get("/api/v1/workspace/", HTTP_X_WORKSPACE="unknown").status_code == 404


def test_api_without_credentials_is_401_not_a_redirect(db):
    response = Client().get("/api/v1/jobs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_roles_are_checked_on_the_server(client_for, api_for, workspace, members):
    # Only admins manage members, through the page and the API.
    for role in ["viewer", "editor", "reviewer"]:
        response = client_for(role).post(
            f"/w/{workspace.slug}/settings/members/", {"username": "viewer-a", "role": "admin"}
        )
        assert response.status_code == 403
        assert (
            api_for(role)
            .post("/api/v1/members/", {"username": "viewer-a", "role": "admin"})
            .status_code
            == 403
        )
    assert members["viewer"].memberships.get(workspace=workspace).role == Role.VIEWER
    response = client_for("admin").post(
        f"/w/{workspace.slug}/settings/members/", {"username": "viewer-a", "role": "editor"}
    )
    assert response.status_code == 302
    assert members["viewer"].memberships.get(workspace=workspace).role == Role.EDITOR


def test_member_form_validates_inline(client_for, workspace):
    response = client_for("admin").post(
        f"/w/{workspace.slug}/settings/members/", {"username": "ghost", "role": "editor"}
    )
    assert response.status_code == 400
    assert b"No user with this username" in response.content


def test_csrf_protects_forms(members, workspace):
    client = Client(enforce_csrf_checks=True)
    client.force_login(members["admin"])
    response = client.post(f"/w/{workspace.slug}/settings/tokens/", {"name": "x"})
    assert response.status_code == 403
    assert b"Form expired" in response.content
    assert not Job.objects.exists()


def test_dashboard_empty_states_guide_a_new_user(client_for, workspace):
    page = client_for("editor").get(f"/w/{workspace.slug}/").content.decode()
    assert "Team A" in page
    assert "No background jobs yet" in page


def test_audit_and_job_pages_show_data_with_an_items_key(workspace, members, client_for):
    # Django templates read `data.items` as the key "items" before the method; a spec
    # version's audit data has such a key.
    job = job_create(workspace=workspace, kind="probe", label="counted")
    job.counts = {"items": 5, "errors": 0}
    job.save(update_fields=["counts"])
    audit_record(
        workspace=workspace, actor=members["admin"], action="spec_version.create", obj=job,
        data={"items": 3, "sources": 1},
    )  # fmt: skip
    client = client_for("admin")
    audit = client.get(f"/w/{workspace.slug}/settings/audit/")
    assert audit.status_code == 200
    assert "items=3, sources=1" in audit.content.decode()
    detail = client.get(f"/w/{workspace.slug}/jobs/{job.pk}/")
    assert detail.status_code == 200
    assert '<th scope="row">items</th><td class="num">5</td>' in detail.content.decode()
