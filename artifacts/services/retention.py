"""Deletion and expiry: the content goes, the tombstone stays, every pointer answers 410."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from artifacts.models import Artifact, ArtifactState
from artifacts.storage import StorageFailed, blob_delete, stale_staging_remove
from governance.errors import Gone
from governance.services import audit_record

logger = logging.getLogger("artifacts.services")


class ArtifactGone(Gone):
    """The artifact expired or was deleted: its content can no longer be read (410)."""

    def __init__(self, artifact: Artifact):
        self.artifact = artifact
        self.reason = artifact.state
        self.at = artifact.gone_at or artifact.expires_at
        if artifact.state == ArtifactState.DELETED:
            who = f" by {artifact.deleted_by.get_username()}" if artifact.deleted_by else ""
            why = f": {artifact.delete_reason.rstrip('.')}" if artifact.delete_reason else ""
            message = f"This artifact was deleted on {self.at:%Y-%m-%d %H:%M} UTC{who}{why}."
        else:
            message = (
                f"This artifact expired on {self.at:%Y-%m-%d %H:%M} UTC under the workspace's "
                "retention policy; its content has been or will be purged."
            )
        super().__init__(message)


def _mark_gone(artifact: Artifact, *, state: str, at: datetime, actor=None, reason: str = ""):
    artifact.state = state
    artifact.gone_at = at
    artifact.line_index = b""
    if state == ArtifactState.DELETED:
        artifact.deleted_by = actor if getattr(actor, "pk", None) else None
        artifact.delete_reason = reason[:500]
    artifact.save(update_fields=["state", "gone_at", "line_index", "deleted_by", "delete_reason"])
    audit_record(
        workspace=artifact.workspace,
        actor=actor,
        action=f"artifact.{'delete' if state == ArtifactState.DELETED else 'expire'}",
        obj=artifact,
        data={"run_id": artifact.run_id, "sha256": artifact.sha256, "reason": reason},
    )
    name = artifact.storage_name
    transaction.on_commit(lambda: _purge_content(artifact.pk, name))


def _purge_content(artifact_id, name: str) -> None:
    try:
        blob_delete(name)
    except StorageFailed:
        logger.exception("purge of %s failed; the scheduled purge retries it", name)
        return
    Artifact.objects.filter(pk=artifact_id, purged_at__isnull=True).update(purged_at=timezone.now())


def artifact_delete(*, artifact: Artifact, actor, reason: str = "") -> Artifact:
    """Delete early: the content goes, the tombstone stays, every pointer now answers 410."""
    with transaction.atomic():
        locked = Artifact.objects.select_for_update().get(pk=artifact.pk)
        if locked.state != ArtifactState.AVAILABLE:
            raise ArtifactGone(locked)
        _mark_gone(
            locked, state=ArtifactState.DELETED, at=timezone.now(), actor=actor, reason=reason
        )
    return locked


@dataclass
class PurgeReport:
    expired: int = 0
    purged: int = 0
    stale_staging: int = 0
    failed: list[str] = field(default_factory=list)


def artifacts_purge(*, now: datetime | None = None, batch: int = 500) -> PurgeReport:
    """Expire what is past its date and remove the content of everything gone."""
    now = now or timezone.now()
    report = PurgeReport()
    while True:
        with transaction.atomic():
            due = list(
                Artifact.objects.select_for_update(skip_locked=True)
                .filter(state=ArtifactState.AVAILABLE, expires_at__lte=now)
                .select_related("workspace")
                .order_by("expires_at")[:batch]
            )
            for artifact in due:
                _mark_gone(artifact, state=ArtifactState.EXPIRED, at=artifact.expires_at)
        report.expired += len(due)
        if len(due) < batch:
            break
    leftovers = Artifact.objects.filter(purged_at__isnull=True).exclude(
        state=ArtifactState.AVAILABLE
    )
    for artifact_id, name in leftovers.values_list("pk", "storage_name").iterator():
        try:
            blob_delete(name)
        except StorageFailed as exc:
            report.failed.append(str(exc))
            continue
        report.purged += Artifact.objects.filter(pk=artifact_id, purged_at__isnull=True).update(
            purged_at=timezone.now()
        )
    report.stale_staging = stale_staging_remove()
    return report
