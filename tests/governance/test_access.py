"""Login on every page, workspace isolation for every role, and role checks on the server."""

import re
import uuid
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.converters import (
    IntConverter,
    PathConverter,
    SlugConverter,
    StringConverter,
    UUIDConverter,
)

from governance.models import Job, Role
from governance.services import audit_record, job_create

pytestmark = pytest.mark.django_db


def iter_routes(patterns=None, prefix="", converters=None):
    """Every routed URL as (route template, {parameter: converter}), includes flattened."""
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        route = prefix + str(entry.pattern)
        found = {**(converters or {}), **getattr(entry.pattern, "converters", {})}
        if isinstance(entry, URLResolver):
            yield from iter_routes(entry.url_patterns, route, found)
        elif isinstance(entry, URLPattern):
            yield route, found


# A sample value for every converter type a route may use.
SAMPLES = {
    IntConverter: 1,
    SlugConverter: "x",
    StringConverter: "x",
    PathConverter: "x",
    UUIDConverter: uuid.UUID("00000000-0000-0000-0000-000000000001"),
}
PARAMETER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


def concrete(route: str, converters: dict, workspace_slug: str) -> str | None:
    """The route with every parameter filled in, or None for a regex route we cannot fill."""
    if route.startswith("^") or "(?P" in route:
        return None

    def fill(match):
        name = match.group("name")
        if name == "workspace":
            return workspace_slug
        converter = converters[name]
        return converter.to_url(SAMPLES[type(converter)])

    return "/" + PARAMETER.sub(fill, route)


PUBLIC = {"/accounts/login/", "/healthz"}
NOT_PAGES = ("/api/", "/v1/", "/admin/")


def test_every_page_needs_a_login(workspace):
    anonymous = Client()
    checked, skipped = [], []
    for route, converters in iter_routes():
        if ("/" + route).startswith(NOT_PAGES):
            continue
        path = concrete(route, converters, workspace.slug)
        if path is None:
            skipped.append(route)
            continue
        if path in PUBLIC:
            continue
        # The filled-in path routes to the very pattern it was made from.
        assert resolve(path).route == route, (route, path)
        response = anonymous.get(path)
        assert response.status_code == 302, (path, response.status_code)
        assert response["Location"] == f"/accounts/login/?next={quote(path)}", path
        checked.append(path)
    assert skipped == []
    assert len(checked) >= 100
    assert f"/w/{workspace.slug}/artifacts/00000000-0000-0000-0000-000000000001/" in checked
    assert f"/w/{workspace.slug}/annotations/sessions/1/calls/1/part/" in checked


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
    viewer = members["viewer"].memberships.get(workspace=workspace)
    for role in ["viewer", "editor", "reviewer"]:
        response = client_for(role).post(
            f"/w/{workspace.slug}/settings/members/", {"member": viewer.pk, "role": "admin"}
        )
        assert response.status_code == 403
        assert (
            api_for(role)
            .patch(f"/api/v1/members/{viewer.pk}/", {"role": "admin"}, format="json")
            .status_code
            == 403
        )
    assert members["viewer"].memberships.get(workspace=workspace).role == Role.VIEWER
    response = client_for("admin").post(
        f"/w/{workspace.slug}/settings/members/", {"member": viewer.pk, "role": "editor"}
    )
    assert response.status_code == 302
    assert members["viewer"].memberships.get(workspace=workspace).role == Role.EDITOR
    response = api_for("admin").patch(
        f"/api/v1/members/{viewer.pk}/", {"role": "reviewer"}, format="json"
    )
    assert response.status_code == 200 and response.json()["role"] == "reviewer"


def test_invitation_form_validates_inline(client_for, workspace):
    response = client_for("admin").post(
        f"/w/{workspace.slug}/settings/members/", {"invitee": "two words", "role": "editor"}
    )
    assert response.status_code == 400
    assert b"A username or an e-mail address has no spaces" in response.content
    response = client_for("admin").post(
        f"/w/{workspace.slug}/settings/members/", {"invitee": "viewer-a", "role": "editor"}
    )
    assert response.status_code == 400
    assert b"viewer-a is already a member" in response.content


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
    assert (
        '<th scope="row" title="items">Items</th><td class="num">5</td>' in detail.content.decode()
    )
