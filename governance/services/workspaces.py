"""Workspaces, their members and users."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from governance.errors import Conflict
from governance.models import (
    ApiToken,
    Membership,
    Role,
    Workspace,
)
from governance.services.audit import audit_record
from governance.services.validation import full_clean


def workspace_create(*, slug: str, name: str = "", actor=None) -> Workspace:
    with transaction.atomic():
        workspace = Workspace(slug=slug, name=name or slug)
        full_clean(workspace, validate_constraints=True)
        workspace.save()
        audit_record(workspace=workspace, actor=actor, action="workspace.create", obj=workspace)
    return workspace


def workspace_bump_data_version(*, workspace: Workspace) -> None:
    Workspace.objects.filter(pk=workspace.pk).update(data_version=F("data_version") + 1)


def membership_set(*, workspace: Workspace, user, role: int, actor=None) -> Membership:
    """Add a member, or change the role of an existing one."""
    with transaction.atomic():
        membership, created = Membership.objects.select_for_update().get_or_create(
            workspace=workspace, user=user, defaults={"role": role}
        )
        previous = None if created else membership.role
        if previous == Role.ADMIN and role != Role.ADMIN:
            _require_another_admin(membership)
        if not created and membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
        if created or previous != role:
            audit_record(
                workspace=workspace,
                actor=actor,
                action="membership.add" if created else "membership.change_role",
                obj=membership,
                data={
                    "user": user.get_username(),
                    "role": Role(role).label,
                    "previous_role": Role(previous).label if previous else None,
                },
            )
    return membership


def _require_another_admin(membership: Membership) -> None:
    """A workspace always keeps an admin: the last one cannot leave or step down."""
    others = (
        Membership.objects.select_for_update()
        .filter(workspace=membership.workspace, role=Role.ADMIN)
        .exclude(pk=membership.pk)
    )
    if not others.exists():
        raise Conflict(
            f"{membership.user.get_username()} is the workspace's only admin: make another "
            "member admin first."
        )


def membership_remove(*, membership: Membership, actor) -> None:
    with transaction.atomic():
        if membership.role == Role.ADMIN:
            _require_another_admin(membership)
        audit_record(
            workspace=membership.workspace,
            actor=actor,
            action="membership.remove",
            obj=membership,
            data={"user": membership.user.get_username()},
        )
        ApiToken.objects.filter(
            workspace=membership.workspace, user=membership.user, revoked_at__isnull=True
        ).update(revoked_at=timezone.now())
        membership.delete()


def user_get_or_create(*, username: str, password: str | None = None):
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    if password is not None:
        user.set_password(password)
        user.save(update_fields=["password"])
    elif created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user
