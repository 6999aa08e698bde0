"""The Django admin writes through the services (audited); tokens and the audit log are read-only."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governance.models import ApiToken, AuditEvent, Job, Membership, Role, Workspace
from governance.services import api_token_create, audit_record, job_create, user_get_or_create
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db):
    return get_user_model().objects.create_superuser("root", "root@example.org", PASSWORD)


@pytest.fixture
def admin_client(superuser):
    client = Client()
    client.force_login(superuser)
    return client


def events(action):
    return list(AuditEvent.objects.filter(action=action).order_by("pk"))


def test_adding_a_member_in_the_admin_is_audited(admin_client, superuser, workspace):
    newcomer = user_get_or_create(username="newcomer", password=PASSWORD)
    response = admin_client.post(
        "/admin/governance/membership/add/",
        {"workspace": workspace.pk, "user": newcomer.pk, "role": Role.EDITOR},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    membership = Membership.objects.get(workspace=workspace, user=newcomer)
    assert membership.role == Role.EDITOR
    [event] = events("membership.add")[-1:]
    assert (event.actor, event.workspace, event.object_id) == (
        superuser,
        workspace,
        str(membership.pk),
    )
    assert event.data == {"user": "newcomer", "role": "editor", "previous_role": None}


def test_changing_a_role_in_the_admin_is_audited(admin_client, superuser, workspace, members):
    membership = Membership.objects.get(workspace=workspace, user=members["viewer"])
    response = admin_client.post(
        f"/admin/governance/membership/{membership.pk}/change/", {"role": Role.ADMIN}
    )
    assert response.status_code == 302
    membership.refresh_from_db()
    assert membership.role == Role.ADMIN
    [event] = events("membership.change_role")
    assert event.actor == superuser and event.object_id == str(membership.pk)
    assert event.data == {"user": "viewer-a", "role": "admin", "previous_role": "viewer"}


def test_user_and_workspace_of_a_membership_cannot_be_moved(
    admin_client, workspace, other_workspace, members
):
    membership = Membership.objects.get(workspace=workspace, user=members["viewer"])
    admin_client.post(
        f"/admin/governance/membership/{membership.pk}/change/",
        {"workspace": other_workspace.pk, "user": members["admin"].pk, "role": Role.VIEWER},
    )
    membership.refresh_from_db()
    assert (membership.workspace, membership.user) == (workspace, members["viewer"])


def test_removing_a_member_in_the_admin_is_audited_and_revokes_their_tokens(
    admin_client, superuser, workspace, members
):
    membership = Membership.objects.get(workspace=workspace, user=members["editor"])
    token = api_token_create(workspace=workspace, user=members["editor"], name="ci").token
    response = admin_client.post(
        f"/admin/governance/membership/{membership.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()
    [event] = events("membership.remove")
    assert event.actor == superuser and event.data == {"user": "editor-a"}
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_bulk_removing_members_in_the_admin_is_audited_per_member(
    admin_client, superuser, workspace, members
):
    chosen = Membership.objects.filter(
        workspace=workspace, user__in=[members["viewer"], members["reviewer"]]
    )
    response = admin_client.post(
        "/admin/governance/membership/",
        {"action": "delete_selected", "_selected_action": [m.pk for m in chosen], "post": "yes"},
    )
    assert response.status_code == 302
    assert sorted(e.data["user"] for e in events("membership.remove")) == [
        "reviewer-a",
        "viewer-a",
    ]
    assert set(Membership.objects.filter(workspace=workspace).values_list("role", flat=True)) == {
        Role.EDITOR,
        Role.ADMIN,
    }


def test_workspace_created_and_renamed_in_the_admin_is_audited(admin_client, superuser):
    response = admin_client.post(
        "/admin/governance/workspace/add/", {"slug": "team-c", "name": "Team C"}
    )
    assert response.status_code == 302
    workspace = Workspace.objects.get(slug="team-c")
    [created] = events("workspace.create")
    assert created.actor == superuser and created.workspace == workspace
    response = admin_client.post(
        f"/admin/governance/workspace/{workspace.pk}/change/", {"name": "Team C, renamed"}
    )
    assert response.status_code == 302
    workspace.refresh_from_db()
    assert (workspace.slug, workspace.name) == ("team-c", "Team C, renamed")
    [renamed] = events("workspace.update")
    assert renamed.actor == superuser and renamed.data == {
        "name": "Team C, renamed",
        "via": "admin",
    }


def test_tokens_jobs_and_audit_events_are_read_only_in_the_admin(admin_client, workspace, members):
    token = api_token_create(workspace=workspace, user=members["editor"], name="ci").token
    job = job_create(workspace=workspace, kind="probe", label="a job")
    event = audit_record(workspace=workspace, actor=members["admin"], action="probe.done")
    for model, obj in (("apitoken", token), ("job", job), ("auditevent", event)):
        base = f"/admin/governance/{model}/"
        assert admin_client.get(base).status_code == 200
        assert admin_client.get(f"{base}{obj.pk}/change/").status_code == 200  # view only
        assert admin_client.get(f"{base}add/").status_code == 403
        assert admin_client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403
        admin_client.post(f"{base}{obj.pk}/change/", {"name": "x", "label": "x", "action": "x"})
    token.refresh_from_db()
    job.refresh_from_db()
    event.refresh_from_db()
    assert (token.name, job.label, event.action) == ("ci", "a job", "probe.done")
    # Un-revoking through the change form is impossible too.
    token.revoked_at = token.created_at
    token.save(update_fields=["revoked_at"])
    admin_client.post(f"/admin/governance/apitoken/{token.pk}/change/", {"revoked_at": ""})
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert AuditEvent.objects.filter(pk=event.pk).exists()
    assert Job.objects.filter(pk=job.pk).exists()


def test_tokens_can_be_revoked_from_the_admin_with_an_audit_event(
    admin_client, superuser, workspace, members
):
    live = api_token_create(workspace=workspace, user=members["editor"], name="live").token
    kept = api_token_create(workspace=workspace, user=members["viewer"], name="kept").token
    response = admin_client.post(
        "/admin/governance/apitoken/", {"action": "revoke", "_selected_action": [live.pk]}
    )
    assert response.status_code == 302
    live.refresh_from_db()
    kept.refresh_from_db()
    assert live.revoked_at is not None and kept.revoked_at is None
    [event] = events("api_token.revoke")
    assert event.actor == superuser and event.object_id == str(live.pk)
    # Revoking again changes nothing and records nothing.
    admin_client.post(
        "/admin/governance/apitoken/", {"action": "revoke", "_selected_action": [live.pk]}
    )
    assert len(events("api_token.revoke")) == 1
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 1
