"""Another workspace's object answers 404 in every app's API, whatever the caller's role.

A role too low for an action answers 403 only for an object of the caller's own workspace:
for any other id the answer is 404, as if the role had allowed the action.
"""

import uuid

import pytest
from django.test import Client

from artifacts.services import artifact_write
from governance.models import ApiToken, Membership, Role
from governance.services import (
    api_token_create,
    job_create,
    membership_set,
    user_get_or_create,
)
from specs.services import spec_create
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def foreign(other_workspace, outsider):
    """Objects of the other workspace (team-b), one per endpoint under test."""
    stranger = user_get_or_create(username="stranger", password=PASSWORD)
    return {
        "member": membership_set(workspace=other_workspace, user=stranger, role=Role.VIEWER),
        "token": api_token_create(workspace=other_workspace, user=outsider, name="theirs").token,
        "job": job_create(workspace=other_workspace, kind="probe", label="secret job"),
        "spec": spec_create(
            workspace=other_workspace, title="Secret spec", consequence="low", actor=outsider
        ),
        "artifact": artifact_write(
            workspace=other_workspace, source=b"secret output\n", run_id="r1", command="make"
        ),
    }


@pytest.fixture
def own(workspace, members):
    return {
        "member": Membership.objects.get(workspace=workspace, user=members["editor"]),
        "job": job_create(workspace=workspace, kind="probe", label="own job"),
        "spec": spec_create(
            workspace=workspace, title="Own spec", consequence="low", actor=members["admin"]
        ),
        "artifact": artifact_write(
            workspace=workspace, source=b"own output\n", run_id="r1", command="make"
        ),
    }


# (method, url template, body, the roles too low for it)
LOW_ROLE_ROUTES = [
    ("delete", "/api/v1/members/{member}/", None, ["viewer", "editor", "reviewer"]),
    ("delete", "/api/v1/jobs/{job}/", None, ["viewer"]),
    ("patch", "/api/v1/specs/{spec}/", {"title": "Taken over"}, ["viewer", "editor"]),
    ("delete", "/api/v1/artifacts/{artifact}/?reason=cleanup", None, ["viewer"]),
]


@pytest.mark.parametrize(("method", "url", "body", "low_roles"), LOW_ROLE_ROUTES)
def test_a_low_role_gets_404_for_foreign_ids_and_403_for_own(
    method, url, body, low_roles, api_for, foreign, own
):
    foreign_ids = {name: obj.pk for name, obj in foreign.items()}
    own_ids = {name: obj.pk for name, obj in own.items()}
    for role in low_roles:
        api = api_for(role)
        send = getattr(api, method)
        response = send(url.format(**foreign_ids), body, format="json")
        assert response.status_code == 404, (role, url, response.status_code)
        assert "secret" not in response.content.decode().lower()
        # An id that exists nowhere, and one that is not even an id, are alike.
        for missing in (999999, uuid.uuid4(), "not-an-id"):
            ids = {name: missing for name in foreign_ids}
            assert send(url.format(**ids), body, format="json").status_code == 404
        response = send(url.format(**own_ids), body, format="json")
        assert response.status_code == 403, (role, url, response.status_code)
        assert f"you are {role}" in response.json()["detail"]
    # Nothing changed anywhere.
    foreign["spec"].refresh_from_db()
    own["spec"].refresh_from_db()
    assert foreign["spec"].title == "Secret spec" and own["spec"].title == "Own spec"
    assert Membership.objects.filter(pk=foreign["member"].pk).exists()
    assert Membership.objects.filter(pk=own["member"].pk).exists()


def test_a_high_enough_role_still_gets_404_for_foreign_and_acts_on_own(api_for, foreign, own):
    admin = api_for("admin")
    assert admin.delete(f"/api/v1/members/{foreign['member'].pk}/").status_code == 404
    assert Membership.objects.filter(pk=foreign["member"].pk).exists()
    reviewer = api_for("reviewer")
    assert (
        reviewer.patch(f"/api/v1/specs/{foreign['spec'].pk}/", {"title": "x"}, format="json")
    ).status_code == 404
    response = reviewer.patch(
        f"/api/v1/specs/{own['spec'].pk}/", {"title": "Own spec, renamed"}, format="json"
    )
    assert response.status_code == 200 and response.json()["title"] == "Own spec, renamed"
    assert admin.delete(f"/api/v1/members/{own['member'].pk}/").status_code == 204
    assert not Membership.objects.filter(pk=own["member"].pk).exists()


def test_list_level_actions_keep_their_role_check(api_for):
    # No object to look up: a low role is refused before anything else happens.
    response = api_for("viewer").post(
        "/api/v1/specs/", {"title": "New", "consequence": "low"}, format="json"
    )
    assert response.status_code == 403
    response = api_for("editor").post(
        "/api/v1/members/", {"username": "editor-a", "role": "admin"}, format="json"
    )
    assert response.status_code == 403


@pytest.mark.parametrize("role", ["viewer", "editor", "reviewer", "admin"])
def test_other_workspace_members_and_tokens_are_404_in_the_api(role, api_for, foreign):
    api = api_for(role)
    member, token = foreign["member"], foreign["token"]
    for path in (f"/api/v1/members/{member.pk}/", f"/api/v1/tokens/{token.pk}/"):
        response = api.get(path)
        assert response.status_code == 404, path
        assert "stranger" not in response.content.decode() and "theirs" not in (
            response.content.decode()
        )
    assert api.post(f"/api/v1/tokens/{token.pk}/revoke/").status_code == 404
    assert api.delete(f"/api/v1/members/{member.pk}/").status_code == 404
    listed = api.get("/api/v1/members/").json()["results"]
    assert "stranger" not in {row["username"] for row in listed}
    assert all(row["id"] != token.pk for row in api.get("/api/v1/tokens/").json()["results"])
    token.refresh_from_db()
    assert token.revoked_at is None
    assert Membership.objects.filter(pk=member.pk).exists()


def test_own_token_revoke_works_and_a_colleagues_token_is_404_for_non_admins(
    api_for, members, workspace
):
    colleague = api_token_create(workspace=workspace, user=members["editor"], name="colleague")
    viewer = api_for("viewer")
    assert viewer.post(f"/api/v1/tokens/{colleague.token.pk}/revoke/").status_code == 404
    own = api_token_create(workspace=workspace, user=members["viewer"], name="mine").token
    response = viewer.post(f"/api/v1/tokens/{own.pk}/revoke/")
    assert response.status_code == 200 and response.json()["revoked_at"]
    assert ApiToken.objects.get(pk=colleague.token.pk).revoked_at is None
    admin = api_for("admin")
    assert admin.post(f"/api/v1/tokens/{colleague.token.pk}/revoke/").status_code == 200


@pytest.mark.parametrize("role", ["viewer", "editor", "reviewer", "admin"])
def test_other_workspace_tokens_and_members_are_404_on_the_pages(
    role, client_for, workspace, foreign
):
    client = client_for(role)
    token, member = foreign["token"], foreign["member"]
    response = client.post(f"/w/{workspace.slug}/settings/tokens/", {"revoke": token.pk})
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    page = client.get(f"/w/{workspace.slug}/settings/members/").content.decode()
    assert "stranger" not in page and "outsider" not in page
    response = client.post(f"/w/{workspace.slug}/settings/members/", {"remove": member.pk})
    # Only admins may remove members; for them, a foreign membership is not found.
    assert response.status_code == (404 if role == "admin" else 403)
    assert Membership.objects.filter(pk=member.pk).exists()


def test_api_docs_and_schema_need_a_login(db):
    anonymous = Client()
    schema = anonymous.get("/api/schema/")
    assert schema.status_code == 401
    assert b"openapi" not in schema.content and b"/api/v1/" not in schema.content
    docs = anonymous.get("/api/docs/")
    assert docs.status_code == 302
    assert docs["Location"] == "/accounts/login/?next=/api/docs/"
    assert b"swagger" not in docs.content.lower()


def test_api_docs_and_schema_for_a_signed_in_user(client_for):
    client = client_for("viewer")
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/members/{id}/" in schema.content
    assert client.get("/api/docs/").status_code == 200
