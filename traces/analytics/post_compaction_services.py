"""Writes for behaviour after compaction: new versions of the correction phrase list (and
the analytics refresh they queue). The section the analytics job computes is in
`post_compaction_compute` (re-exported here), which the analytics services import."""

from __future__ import annotations

from django.db import transaction

from governance.errors import InputError
from governance.models import Workspace
from governance.services import audit_record, workspace_bump_data_version, workspace_lock
from traces.analysis.post_compaction import normalise_phrases
from traces.analytics.models import CorrectionPhraseList
from traces.analytics.post_compaction_compute import (
    correction_matches_store,
    post_compaction_section,
)
from traces.analytics.post_compaction_selectors import phrase_list_current
from traces.analytics.services import analytics_refresh_queue

__all__ = ["correction_matches_store", "correction_phrases_save", "post_compaction_section"]

MAX_PHRASES = 500
MAX_PHRASE_CHARS = 200


def correction_phrases_save(
    *, workspace: Workspace, phrases: list[str], actor, note: str = ""
) -> CorrectionPhraseList:
    """Save the phrases as the next version (audit-logged). The traces' analytics are then
    out of date: the data version moves on and the unfiltered view is queued again."""
    cleaned = normalise_phrases(phrases)
    if not cleaned:
        raise InputError("The phrase list needs at least one phrase.")
    if len(cleaned) > MAX_PHRASES:
        raise InputError(f"At most {MAX_PHRASES} phrases.")
    long = [p for p in cleaned if len(p) > MAX_PHRASE_CHARS]
    if long:
        raise InputError(f"Phrases are at most {MAX_PHRASE_CHARS} characters: {long[0][:40]}…")
    with transaction.atomic():
        workspace_lock(workspace=workspace)  # two saves must not both take version n + 1
        current = phrase_list_current(workspace=workspace)
        if current.phrases == cleaned and current.row is not None:
            raise InputError("Nothing changed: the phrases are those of the current version.")
        row = CorrectionPhraseList(
            workspace=workspace,
            version=current.version + 1,
            phrases=cleaned,
            note=note[:500],
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        row.full_clean()
        row.save()
        before = set(current.phrases)
        audit_record(
            workspace=workspace,
            actor=actor,
            action="correction_phrases.save",
            obj=row,
            data={
                "version": row.version,
                "previous_version": current.version,
                "added": [p for p in cleaned if p not in before],
                "removed": [p for p in current.phrases if p not in set(cleaned)],
            },
        )
        workspace_bump_data_version(workspace=workspace)
        transaction.on_commit(lambda: _refresh(workspace))
    return row


def _refresh(workspace: Workspace) -> None:
    analytics_refresh_queue(workspace=workspace)
