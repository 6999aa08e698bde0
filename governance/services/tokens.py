"""API tokens: issued once, stored hashed, revoked, and checked on each request."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from governance.errors import DomainError, InputError
from governance.models import (
    ApiToken,
    Membership,
    Workspace,
)
from governance.services.audit import audit_record

TOKEN_PREFIX = "cg_"
LAST_USED_RESOLUTION_SECONDS = 60


def token_hash(raw: str) -> str:
    # Tokens carry 256 bits of randomness, so a fast hash is enough: no dictionary to guess from.
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str = field(repr=False)


def api_token_create(
    *, workspace: Workspace, user, name: str = "", run_id: str = "", actor=None
) -> IssuedToken:
    """Issue a token. The plaintext is returned once and never stored."""
    if not Membership.objects.filter(workspace=workspace, user=user).exists():
        raise InputError(f"{user.get_username()} is not a member of workspace {workspace.slug}")
    prefix = secrets.token_hex(4)
    plaintext = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        token = ApiToken.objects.create(
            workspace=workspace,
            user=user,
            name=name,
            prefix=f"{TOKEN_PREFIX}{prefix}",
            token_hash=token_hash(plaintext),
            run_id=run_id,
        )
        audit_record(
            workspace=workspace,
            actor=actor or user,
            action="api_token.create",
            obj=token,
            data={"name": name, "for_user": user.get_username(), "run_id": run_id},
        )
    return IssuedToken(token=token, plaintext=plaintext)


def api_token_revoke(*, token: ApiToken, actor) -> ApiToken:
    with transaction.atomic():
        updated = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        token.refresh_from_db()
        if updated:
            audit_record(
                workspace=token.workspace, actor=actor, action="api_token.revoke", obj=token
            )
    return token


class TokenRejected(DomainError):
    """The presented token is unknown, revoked, or its owner is no longer a member (401)."""

    status = 401
    code = "not_authenticated"


def api_token_authenticate(*, raw: str) -> tuple[ApiToken, Membership]:
    """Resolve a presented token, refresh last_used_at (at most once a minute)."""
    token = (
        ApiToken.objects.select_related("workspace", "user")
        .filter(token_hash=token_hash(raw))
        .first()
    )
    if token is None:
        raise TokenRejected("Invalid token.")
    if token.revoked_at is not None:
        raise TokenRejected(f"This token was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC.")
    if not token.user.is_active:
        raise TokenRejected("The token's user is inactive.")
    membership = Membership.objects.filter(workspace=token.workspace, user=token.user).first()
    if membership is None:
        raise TokenRejected("The token's user is no longer a member of its workspace.")
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > (
        LAST_USED_RESOLUTION_SECONDS
    ):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token, membership
