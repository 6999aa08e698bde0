"""Writes for behaviour after compaction (new versions of the correction phrase list) and
the section the analytics job computes."""

from __future__ import annotations

from django.db import transaction

from governance.errors import InputError
from governance.models import Workspace
from governance.services import audit_record, workspace_bump_data_version, workspace_lock
from traces.analysis.post_compaction import PhraseMatcher, normalise_phrases, post_compaction
from traces.analytics.models import CorrectionMatchCache, CorrectionPhraseList
from traces.analytics.post_compaction_selectors import (
    MatchCache,
    corpus_load,
    match_cache_get,
    phrase_list_current,
)
from traces.analytics.selectors import AnalyticsFilters

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
    from traces.analytics.services import analytics_refresh_queue

    analytics_refresh_queue(workspace=workspace)


def post_compaction_section(*, workspace: Workspace, filters: AnalyticsFilters) -> dict:
    """The section as the analytics job stores it, with the phrase list it used. Prompts
    matched before with the same phrases are not matched again (`CorrectionMatchCache`)."""
    phrases = phrase_list_current(workspace=workspace)
    matcher = PhraseMatcher(phrases.phrases)
    cache = match_cache_get(workspace=workspace, matcher=matcher)
    corpus = corpus_load(workspace=workspace, filters=filters, matcher=matcher, cache=cache)
    if cache.changed:
        correction_match_cache_store(workspace=workspace, cache=cache)
    result = post_compaction(corpus, phrase_version=phrases.version)
    result["phrases"] = phrases.phrases
    return result


def correction_match_cache_store(*, workspace: Workspace, cache: MatchCache) -> None:
    """Keep the matches for the next refresh (one row per workspace; a derived cache, so
    not audit-logged). Two jobs storing at once: the last one wins, and either is right."""
    CorrectionMatchCache.objects.update_or_create(
        workspace=workspace, defaults={"key": cache.key, "data": cache.records.tobytes()}
    )
