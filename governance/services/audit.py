"""The audit log: one event per state change, in the transaction of the change."""

from __future__ import annotations

from typing import Any

from django.db import models

from governance.models import (
    AuditEvent,
    Workspace,
)


def audit_record(
    *,
    workspace: Workspace,
    actor,
    action: str,
    obj: models.Model | None = None,
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Record one state-changing action. Call inside the transaction that makes the change."""
    actor_id = getattr(actor, "pk", None) if actor is not None else None
    return AuditEvent.objects.create(
        workspace=workspace,
        actor_id=actor_id,
        action=action,
        object_type=obj._meta.label_lower if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        object_repr=str(obj)[:300] if obj is not None else "",
        data=data or {},
    )
