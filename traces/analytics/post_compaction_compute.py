"""The section of behaviour after compaction as the analytics job computes it, and the
match cache it keeps. Apart from `post_compaction_services` (which queues the analytics
refresh) so that the analytics services can import it without an import cycle."""

from __future__ import annotations

from governance.models import Workspace
from traces.analysis.post_compaction import PhraseMatcher, post_compaction
from traces.analytics.models import CorrectionMatchCache
from traces.analytics.post_compaction_selectors import (
    MatchCache,
    corpus_load,
    match_cache_get,
    phrase_list_current,
)
from traces.analytics.selectors import AnalyticsFilters


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
