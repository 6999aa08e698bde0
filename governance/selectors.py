"""Reads for the core: memberships, invitations, workspaces a user can see, jobs and the audit log."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from governance.models import (
    ApiToken,
    AuditEvent,
    Invitation,
    InvitationStatus,
    Job,
    Membership,
    Workspace,
)


def memberships_for_user(*, user) -> QuerySet[Membership]:
    if not getattr(user, "is_authenticated", False):
        return Membership.objects.none()
    return Membership.objects.filter(user=user).select_related("workspace")


def membership_get(*, user, workspace_slug: str) -> Membership:
    """The user's membership in a workspace; 404 if the workspace is unknown or not theirs."""
    membership = memberships_for_user(user=user).filter(workspace__slug=workspace_slug).first()
    if membership is None:
        raise Http404("No such workspace, or you are not a member of it.")
    return membership


def workspace_members(*, workspace: Workspace) -> QuerySet[Membership]:
    return Membership.objects.filter(workspace=workspace).select_related("user")


def api_tokens_for(*, workspace: Workspace, user=None) -> QuerySet[ApiToken]:
    tokens = ApiToken.objects.filter(workspace=workspace).select_related("user")
    return tokens.filter(user=user) if user is not None else tokens


def jobs_for(*, workspace: Workspace, kind: str | None = None) -> QuerySet[Job]:
    jobs = Job.objects.filter(workspace=workspace).select_related("created_by")
    return jobs.filter(kind=kind) if kind else jobs


def job_get(*, workspace: Workspace, pk: int) -> Job:
    job = jobs_for(workspace=workspace).filter(pk=pk).first()
    if job is None:
        raise Http404("No such job in this workspace.")
    return job


def audit_events_for(*, workspace: Workspace) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(workspace=workspace).select_related("actor")


def invitee_names(*, user) -> list[str]:
    """What an invitation may name to reach this user: the username, the e-mail address."""
    names = [user.get_username()]
    if "@" in names[0]:
        names.append(names[0].lower())
    if getattr(user, "email", ""):
        names.append(user.email.lower())
    return names


def invitations_for_user(*, user) -> QuerySet[Invitation]:
    """Every invitation addressed to the user, whatever its state."""
    if not getattr(user, "is_authenticated", False):
        return Invitation.objects.none()
    return Invitation.objects.filter(invitee__in=invitee_names(user=user)).select_related(
        "workspace", "invited_by"
    )


def invitations_pending_for_user(*, user) -> QuerySet[Invitation]:
    return invitations_for_user(user=user).filter(
        status=InvitationStatus.PENDING, expires_at__gt=timezone.now()
    )


def invitation_for_user(*, user, pk) -> Invitation:
    """One of the user's invitations; 404 for anyone else's."""
    invitation = invitations_for_user(user=user).filter(pk=pk).first()
    if invitation is None:
        raise Http404("No such invitation for you.")
    return invitation


def invitations_open_for_workspace(*, workspace: Workspace) -> QuerySet[Invitation]:
    """Invitations not yet answered or revoked (expired ones included, marked as such)."""
    return Invitation.objects.filter(
        workspace=workspace, status=InvitationStatus.PENDING
    ).select_related("invited_by")
