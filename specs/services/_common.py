"""What the spec services share: their errors, locks and the checks every write makes.

Every state change of a version happens with the spec row locked (`select_for_update`), so
submissions and approvals of one spec are applied one at a time: the ordering rule that keeps
versions from competing. The stale-base check runs inside that lock.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import models

from governance.errors import Conflict, Forbidden, InputError
from governance.models import Membership, Workspace
from governance.services.validation import full_clean  # noqa: F401 (used by the modules here)
from specs.analysis.content import normalize_text
from specs.models import Spec, SpecVersion, VersionStatus


class SpecConflict(Conflict):
    """The request conflicts with the spec's current state (409); the body names `current`."""

    def __init__(self, message: str, *, current: SpecVersion | None = None):
        payload = {}
        if current is not None:
            payload["current_version"] = {
                "id": current.pk,
                "number": current.number,
                "fingerprint": current.fingerprint,
            }
        super().__init__(message, payload=payload)
        self.current = current


class StaleBase(SpecConflict):
    """The version supersedes something other than the current authoritative version."""

    code = "stale_base"


class SelfReviewRefused(Forbidden):
    """The author of a version tried to approve or reject it."""

    code = "self_review"


def fields_clean(instance: models.Model, names: Iterable[str]) -> dict[str, list[str]]:
    """The validators of some fields of an unsaved instance: {field: messages}, empty if valid."""
    names = set(names)
    exclude = [f.name for f in instance._meta.fields if f.name not in names]
    try:
        instance.clean_fields(exclude=exclude)
    except ValidationError as exc:
        return exc.message_dict
    return {}


def _authoritative(spec: Spec) -> SpecVersion | None:
    return SpecVersion.objects.filter(spec=spec, status=VersionStatus.AUTHORITATIVE).first()


def _lock_version(version: SpecVersion) -> SpecVersion:
    return (
        SpecVersion.objects.select_for_update(of=("self",))
        .select_related("spec", "supersedes")
        .get(pk=version.pk)
    )


def _require_current_base(
    supersedes: SpecVersion | None, current: SpecVersion | None, *, doing: str
) -> None:
    if (supersedes.pk if supersedes else None) == (current.pk if current else None):
        return
    if current is None:
        raise StaleBase(
            f"Cannot {doing} this: it supersedes v{supersedes.number}, but the specification "
            "has no authoritative version.",
            current=None,
        )
    named = f"v{supersedes.number}" if supersedes else "nothing"
    raise StaleBase(
        f"Stale base: this supersedes {named}, but v{current.number} "
        f"(sha256:{current.fingerprint[:12]}) is now authoritative. Start a new version "
        f"from v{current.number}.",
        current=current,
    )


def _require_member(workspace: Workspace, user, *, field: str) -> None:
    if not Membership.objects.filter(workspace=workspace, user=user).exists():
        raise InputError.for_fields({field: "Choose a member of this workspace."})


def _texts(values: Iterable[str]) -> list[str]:
    return [text for text in (normalize_text(value) for value in values) if text]


def _username(user) -> str | None:
    return user.get_username() if user is not None else None
