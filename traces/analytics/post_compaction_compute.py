"""The section of behaviour after compaction as the analytics job computes it, and the
correction matches it stores for prompts whose stored match was stale. Apart from
`post_compaction_services` (which queues the analytics refresh) so that the analytics
services can import it without an import cycle."""

from __future__ import annotations

from collections import defaultdict

from django.db import connection

from governance.models import Workspace
from traces.analysis.post_compaction import PhraseMatcher, post_compaction
from traces.analytics.post_compaction_selectors import (
    Rematched,
    corpus_load,
    phrase_list_current,
)
from traces.analytics.selectors import AnalyticsFilters
from traces.models import Call

STORE_CHUNK = 10_000  # calls per update (SQLite binds each id)


def post_compaction_section(*, workspace: Workspace, filters: AnalyticsFilters) -> dict:
    """The section as the analytics job stores it, with the phrase list it used. Prompts
    are matched at ingest; those matched under another list (or not yet) are matched here
    and their matches stored, so that the next refresh reads them."""
    phrases = phrase_list_current(workspace=workspace)
    matcher = PhraseMatcher(phrases.phrases)
    rematched = Rematched(matcher.key)
    corpus = corpus_load(workspace=workspace, filters=filters, matcher=matcher, rematched=rematched)
    if rematched.calls:
        correction_matches_store(workspace=workspace, rematched=rematched)
    result = post_compaction(corpus, phrase_version=phrases.version)
    result["phrases"] = phrases.phrases
    return result


def correction_matches_store(*, workspace: Workspace, rematched: Rematched) -> int:
    """Store the matches made again (derived facts of the calls, so not audit-logged).
    A call stored meanwhile under the same key keeps its own match. Returns the calls
    updated."""
    if connection.vendor == "postgresql":
        return _store_unnest(workspace, rematched)
    by_phrase: dict[int, list[int]] = defaultdict(list)
    for call, phrase in zip(rematched.calls, rematched.phrases, strict=True):
        by_phrase[phrase].append(call)
    updated = 0
    for phrase, calls in sorted(by_phrase.items()):
        for start in range(0, len(calls), STORE_CHUNK):
            updated += (
                Call.objects.filter(workspace=workspace, pk__in=calls[start : start + STORE_CHUNK])
                .exclude(correction_key=rematched.key)
                .update(correction_phrase=phrase, correction_key=rematched.key)
            )
    return updated


def _store_unnest(workspace: Workspace, rematched: Rematched) -> int:
    updated = 0
    with connection.cursor() as cursor:
        for start in range(0, len(rematched.calls), 50_000):
            cursor.execute(
                "UPDATE traces_call c SET correction_phrase = v.phrase, correction_key = %s "
                "FROM unnest(%s::int8[], %s::int2[]) AS v(id, phrase) "
                "WHERE c.id = v.id AND c.workspace_id = %s "
                "AND c.correction_key IS DISTINCT FROM %s",
                [
                    rematched.key,
                    _array(rematched.calls[start : start + 50_000]),
                    _array(rematched.phrases[start : start + 50_000]),
                    workspace.pk,
                    rematched.key,
                ],
            )
            updated += cursor.rowcount
    return updated


def _array(values: list[int]) -> str:
    """An array literal: psycopg adapts a long list of ints item by item, far slower."""
    return "{" + ",".join(map(str, values)) + "}"
