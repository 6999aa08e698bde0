"""Invitations: an admin offers a role, only the invitee's acceptance adds the member, and
nobody learns from the answer whether a username exists."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from governance import selectors
from governance.errors import Conflict, Gone, InputError
from governance.models import AuditEvent, Invitation, InvitationStatus, Membership, Role
from governance.services import (
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_revoke,
    user_get_or_create,
)
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def newcomer(db):
    user = user_get_or_create(username="nora", password=PASSWORD)
    user.email = "Nora@Example.org"
    user.save(update_fields=["email"])
    return user


def actions(workspace) -> list[str]:
    return list(
        AuditEvent.objects.filter(workspace=workspace, action__startswith="invitation.")
        .order_by("id")
        .values_list("action", flat=True)
    )


def test_accepting_creates_the_membership_and_everything_is_audited(workspace, members, newcomer):
    invitation = invitation_create(
        workspace=workspace, invitee="nora", role=Role.EDITOR, actor=members["admin"]
    )
    assert not Membership.objects.filter(workspace=workspace, user=newcomer).exists()
    assert invitation.expires_at - timezone.now() > timedelta(days=13, hours=23)
    assert list(selectors.invitations_pending_for_user(user=newcomer)) == [invitation]
    membership = invitation_accept(invitation=invitation, user=newcomer)
    assert membership.role == Role.EDITOR and membership.workspace == workspace
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.ACCEPTED
    assert invitation.answered_by == newcomer
    assert actions(workspace) == ["invitation.create", "invitation.accept"]
    added = AuditEvent.objects.get(workspace=workspace, action="membership.add", data__user="nora")
    assert added.actor == newcomer and added.data["role"] == "editor"
    assert list(selectors.invitations_pending_for_user(user=newcomer)) == []


def test_an_email_invitation_reaches_the_user_with_that_address(workspace, members, newcomer):
    invitation = invitation_create(
        workspace=workspace, invitee=" NORA@example.ORG ", role=Role.VIEWER, actor=members["admin"]
    )
    assert invitation.invitee == "nora@example.org"
    assert list(selectors.invitations_pending_for_user(user=newcomer)) == [invitation]
    # Nobody else sees it, nor can answer it.
    assert list(selectors.invitations_pending_for_user(user=members["editor"])) == []


def test_declining_adds_nobody(workspace, members, newcomer):
    invitation = invitation_create(
        workspace=workspace, invitee="nora", role=Role.ADMIN, actor=members["admin"]
    )
    invitation_decline(invitation=invitation, user=newcomer)
    assert not Membership.objects.filter(workspace=workspace, user=newcomer).exists()
    with pytest.raises(Conflict, match="already declined"):
        invitation_accept(invitation=invitation, user=newcomer)
    assert actions(workspace) == ["invitation.create", "invitation.decline"]


def test_an_expired_invitation_cannot_be_accepted(workspace, members, newcomer):
    invitation = invitation_create(
        workspace=workspace, invitee="nora", role=Role.EDITOR, actor=members["admin"]
    )
    Invitation.objects.filter(pk=invitation.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    invitation.refresh_from_db()
    assert invitation.is_expired and invitation.state_label == "expired"
    assert list(selectors.invitations_pending_for_user(user=newcomer)) == []
    with pytest.raises(Gone, match="expired"):
        invitation_accept(invitation=invitation, user=newcomer)
    assert not Membership.objects.filter(workspace=workspace, user=newcomer).exists()
    # Inviting again renews the same invitation.
    renewed = invitation_create(
        workspace=workspace, invitee="nora", role=Role.REVIEWER, actor=members["admin"]
    )
    assert renewed.pk == invitation.pk and not renewed.is_expired
    assert renewed.role == Role.REVIEWER
    assert actions(workspace) == ["invitation.create", "invitation.renew"]


def test_a_revoked_invitation_cannot_be_accepted(workspace, members, newcomer):
    invitation = invitation_create(
        workspace=workspace, invitee="nora", role=Role.EDITOR, actor=members["admin"]
    )
    invitation_revoke(invitation=invitation, actor=members["admin"])
    with pytest.raises(Conflict, match="already revoked"):
        invitation_accept(invitation=invitation, user=newcomer)
    with pytest.raises(Conflict):
        invitation_revoke(invitation=invitation, actor=members["admin"])
    assert not Membership.objects.filter(workspace=workspace, user=newcomer).exists()
    assert actions(workspace) == ["invitation.create", "invitation.revoke"]


def test_one_open_invitation_per_invitee_is_a_database_rule(workspace, members):
    invitation_create(workspace=workspace, invitee="ghost", role=Role.EDITOR, actor=None)
    with pytest.raises(IntegrityError), transaction.atomic():
        Invitation.objects.create(
            workspace=workspace,
            invitee="ghost",
            role=Role.VIEWER,
            expires_at=timezone.now() + Invitation.LIFETIME,
        )


@pytest.mark.parametrize("invitee", ["", "   ", "two words", "x" * 255])
def test_invitee_must_be_one_name(workspace, members, invitee):
    with pytest.raises(InputError):
        invitation_create(
            workspace=workspace, invitee=invitee, role=Role.EDITOR, actor=members["admin"]
        )


def test_a_member_is_not_invited_again(workspace, members):
    with pytest.raises(InputError, match="already a member"):
        invitation_create(
            workspace=workspace, invitee="viewer-a", role=Role.ADMIN, actor=members["admin"]
        )


def test_a_member_who_accepts_keeps_their_role(workspace, members):
    invitation = invitation_create(
        workspace=workspace,
        invitee="viewer-a@example.org",
        role=Role.ADMIN,
        actor=members["admin"],
    )
    members["viewer"].email = "viewer-a@example.org"
    members["viewer"].save(update_fields=["email"])
    membership = invitation_accept(invitation=invitation, user=members["viewer"])
    assert membership.role == Role.VIEWER


# --- the members and invitations pages ---------------------------------------


def test_the_answer_is_the_same_for_a_user_that_exists_and_one_that_does_not(
    client_for, workspace, newcomer
):
    admin = client_for("admin")
    answers = []
    for invitee in ("nora", "nobody-by-this-name"):
        response = admin.post(
            f"/w/{workspace.slug}/settings/members/",
            {"invitee": invitee, "role": "editor"},
            follow=True,
        )
        assert response.status_code == 200
        message = next(str(m) for m in response.context["messages"])
        answers.append(message.replace(invitee, "NAME"))
    assert answers[0] == answers[1]
    assert answers[0].startswith("Invited NAME as editor. They see the invitation when they sign")
    assert not Membership.objects.filter(workspace=workspace, user=newcomer).exists()
    assert set(Invitation.objects.values_list("invitee", flat=True)) == {
        "nora",
        "nobody-by-this-name",
    }


def test_only_admins_invite_revoke_and_see_invitations(client_for, workspace, members):
    invitation = invitation_create(
        workspace=workspace, invitee="ghost", role=Role.EDITOR, actor=members["admin"]
    )
    for role in ("viewer", "editor", "reviewer"):
        client = client_for(role)
        url = f"/w/{workspace.slug}/settings/members/"
        assert client.post(url, {"invitee": "x", "role": "admin"}).status_code == 403
        assert client.post(url, {"revoke": invitation.pk}).status_code == 403
        assert "ghost" not in client.get(url).content.decode()
    page = client_for("admin").get(f"/w/{workspace.slug}/settings/members/").content.decode()
    assert "Revoke the invitation of ghost" in page
    assert Invitation.objects.filter(workspace=workspace).count() == 1


def test_an_invitation_is_answered_only_by_its_invitee(workspace, members, newcomer):
    invitation = invitation_create(
        workspace=workspace, invitee="nora", role=Role.EDITOR, actor=members["admin"]
    )
    stranger = Client()
    stranger.force_login(members["editor"])
    assert stranger.post("/invitations/", {"accept": invitation.pk}).status_code == 404
    assert stranger.post("/invitations/", {"accept": "not-a-number"}).status_code == 404
    invitee = Client()
    invitee.force_login(newcomer)
    home = invitee.get("/")
    assert home.status_code == 200
    assert "Accept and join Team A" in home.content.decode()
    response = invitee.post("/invitations/", {"accept": invitation.pk})
    assert response.status_code == 302 and response["Location"] == f"/w/{workspace.slug}/"
    assert Membership.objects.get(workspace=workspace, user=newcomer).role == Role.EDITOR
    again = invitee.post("/invitations/", {"accept": invitation.pk}, follow=True)
    assert "This invitation was already accepted." in again.content.decode()


def test_a_member_of_one_workspace_sees_a_banner_for_another(
    workspace, other_workspace, members, outsider
):
    invitation_create(
        workspace=other_workspace, invitee="editor-a", role=Role.VIEWER, actor=outsider
    )
    client = Client()
    client.force_login(members["editor"])
    page = client.get(f"/w/{workspace.slug}/").content.decode()
    assert "You have 1 open invitation to another workspace." in page
    listing = client.get("/invitations/").content.decode()
    assert "Accept and join Team B" in listing


def test_members_page_changes_a_role_without_an_invitation(client_for, workspace, members):
    viewer = Membership.objects.get(workspace=workspace, user=members["viewer"])
    response = client_for("admin").post(
        f"/w/{workspace.slug}/settings/members/", {"member": viewer.pk, "role": "editor"}
    )
    assert response.status_code == 302
    viewer.refresh_from_db()
    assert viewer.role == Role.EDITOR


def test_the_api_invites_and_no_longer_adds_members_directly(api_for, workspace, newcomer):
    admin = api_for("admin")
    assert admin.post(
        "/api/v1/members/", {"username": "nora", "role": "admin"}, format="json"
    ).status_code in (403, 405)
    response = admin.post(
        "/api/v1/invitations/", {"invitee": "nora", "role": "editor"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["invitee"] == "nora" and body["role"] == "editor" and body["state"] == "pending"
    ghost = admin.post(
        "/api/v1/invitations/", {"invitee": "nobody-here", "role": "editor"}, format="json"
    )
    assert ghost.status_code == 201 and set(ghost.json()) == set(body)
    assert not Membership.objects.filter(workspace=workspace, user=newcomer).exists()
    listed = admin.get("/api/v1/invitations/").json()["results"]
    assert {row["invitee"] for row in listed} == {"nora", "nobody-here"}
    revoked = admin.post(f"/api/v1/invitations/{body['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    assert api_for("editor").get("/api/v1/invitations/").status_code == 403
