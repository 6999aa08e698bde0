"""Invitations to a workspace: created by an admin, accepted, declined or revoked."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from governance.errors import Conflict, Gone, InputError
from governance.models import (
    Invitation,
    InvitationStatus,
    Membership,
    Role,
    Workspace,
)
from governance.services.audit import audit_record
from governance.services.validation import full_clean
from governance.services.workspaces import membership_set

# An admin invites a username or an e-mail address; the answer is the same whether or not
# such a user exists (no enumeration), and only the invitee's acceptance adds the member.


def invitee_normalize(raw: str) -> str:
    invitee = (raw or "").strip()
    if not invitee:
        raise InputError("Enter a username or an e-mail address.")
    if len(invitee) > 254 or any(ch.isspace() for ch in invitee):
        raise InputError(
            "A username or an e-mail address has no spaces and at most 254 characters."
        )
    return invitee.lower() if "@" in invitee else invitee


def workspace_lock(*, workspace: Workspace) -> None:
    """Hold the workspace row until the transaction ends, for writes that insert the next
    row of a per-workspace sequence (a version, an invitation) and must not race."""
    list(Workspace.objects.select_for_update().filter(pk=workspace.pk).values_list("pk"))


def invitation_create(*, workspace: Workspace, invitee: str, role: int, actor) -> Invitation:
    """Invite `invitee` with `role`. Inviting again while one is open renews it (new role,
    a fresh expiry) rather than adding a second."""
    invitee = invitee_normalize(invitee)
    role = Role(role)
    if Membership.objects.filter(workspace=workspace, user__username=invitee).exists():
        raise InputError(f"{invitee} is already a member; change their role in the table.")
    expires_at = timezone.now() + Invitation.LIFETIME
    with transaction.atomic():
        # A row lock on the invitation cannot cover one that does not exist yet: two first
        # invitations of one person would both insert. The workspace row serialises them.
        workspace_lock(workspace=workspace)
        invitation = (
            Invitation.objects.select_for_update()
            .filter(workspace=workspace, invitee=invitee, status=InvitationStatus.PENDING)
            .first()
        )
        action = "invitation.renew" if invitation else "invitation.create"
        if invitation is None:
            invitation = Invitation(workspace=workspace, invitee=invitee)
        invitation.role = role
        invitation.invited_by = actor
        invitation.expires_at = expires_at
        full_clean(invitation, validate_constraints=True)
        invitation.save()
        audit_record(
            workspace=workspace,
            actor=actor,
            action=action,
            obj=invitation,
            data={"invitee": invitee, "role": role.label, "expires_at": expires_at.isoformat()},
        )
    return invitation


def _invitation_lock_open(invitation: Invitation) -> Invitation:
    """The invitation's row, locked, if still open; else Conflict or Gone saying why."""
    locked = (
        Invitation.objects.select_for_update().select_related("workspace").get(pk=invitation.pk)
    )
    if locked.status != InvitationStatus.PENDING:
        raise Conflict(f"This invitation was already {locked.status}.")
    if locked.is_expired:
        raise Gone(
            f"This invitation expired on {locked.expires_at:%Y-%m-%d}. "
            "Ask an admin of the workspace for a new one."
        )
    return locked


def _invitation_close(invitation: Invitation, *, status: str, user, action: str) -> None:
    invitation.status = status
    invitation.answered_at = timezone.now()
    invitation.answered_by = user
    invitation.save(update_fields=["status", "answered_at", "answered_by"])
    audit_record(
        workspace=invitation.workspace,
        actor=user,
        action=action,
        obj=invitation,
        data={"invitee": invitation.invitee, "role": Role(invitation.role).label},
    )


def invitation_accept(*, invitation: Invitation, user) -> Membership:
    """The invitee joins with the invited role (a member already keeps the role they have)."""
    with transaction.atomic():
        invitation = _invitation_lock_open(invitation)
        _invitation_close(
            invitation, status=InvitationStatus.ACCEPTED, user=user, action="invitation.accept"
        )
        membership = Membership.objects.filter(workspace=invitation.workspace, user=user).first()
        if membership is None:
            membership = membership_set(
                workspace=invitation.workspace, user=user, role=invitation.role, actor=user
            )
    return membership


def invitation_decline(*, invitation: Invitation, user) -> Invitation:
    with transaction.atomic():
        invitation = _invitation_lock_open(invitation)
        _invitation_close(
            invitation, status=InvitationStatus.DECLINED, user=user, action="invitation.decline"
        )
    return invitation


def invitation_revoke(*, invitation: Invitation, actor) -> Invitation:
    """An admin withdraws an open invitation (an expired one too)."""
    with transaction.atomic():
        locked = (
            Invitation.objects.select_for_update().select_related("workspace").get(pk=invitation.pk)
        )
        if locked.status != InvitationStatus.PENDING:
            raise Conflict(f"This invitation was already {locked.status}.")
        _invitation_close(
            locked, status=InvitationStatus.REVOKED, user=actor, action="invitation.revoke"
        )
    return locked
