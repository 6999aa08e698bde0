"""Reads for behaviour after compaction: the workspace's correction phrase list, its match
cache, and the observations (operator messages, tool results) by step since the last
compaction. On PostgreSQL they are grouped in the database from the facts stored at derive
time (`post_compaction_grouped`); elsewhere read call by call (`post_compaction_rows`).
Operator prompts are matched once per phrase list (`CorrectionMatchCache`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
from django.db import connection

from governance.models import Workspace
from traces.analysis.post_compaction import (
    DEFAULT_PHRASE_VERSION,
    DEFAULT_PHRASES,
    MATCHER_REVISION,
    Corpus,
    PhraseMatcher,
)
from traces.analytics.models import CorrectionMatchCache, CorrectionPhraseList
from traces.analytics.post_compaction_grouped import corpus_load_grouped
from traces.analytics.post_compaction_rows import (
    MATCH_CACHE_DTYPE,
    MAX_MATCHES,
    MatchCache,
    _match_row,
    corpus_load_rows,
)
from traces.analytics.selectors import AnalyticsFilters

__all__ = ["MATCH_CACHE_DTYPE", "MAX_MATCHES", "MatchCache", "_match_row", "corpus_load"]


@dataclass(frozen=True)
class PhraseList:
    version: int
    phrases: list[str]
    row: CorrectionPhraseList | None  # None: the shipped default, never saved


def phrase_list_current(*, workspace: Workspace) -> PhraseList:
    row = CorrectionPhraseList.objects.filter(workspace=workspace).order_by("-version").first()
    if row is None:
        return PhraseList(DEFAULT_PHRASE_VERSION, list(DEFAULT_PHRASES), None)
    return PhraseList(row.version, list(row.phrases), row)


def phrase_list_history(*, workspace: Workspace):
    return CorrectionPhraseList.objects.filter(workspace=workspace).select_related("created_by")


def match_cache_key(matcher: PhraseMatcher) -> str:
    """Names the phrases (in order: the first listed is the one reported) and the matcher."""
    canonical = json.dumps([MATCHER_REVISION, matcher.phrases], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def match_cache_get(*, workspace: Workspace, matcher: PhraseMatcher) -> MatchCache:
    """The cached matches of the matcher's phrases (none when another list made them)."""
    key = match_cache_key(matcher)
    row = CorrectionMatchCache.objects.filter(workspace=workspace).values_list("key", "data")
    found = row.first()
    if found is None or found[0] != key:
        return MatchCache(key)
    return MatchCache(key, np.frombuffer(bytes(found[1]), MATCH_CACHE_DTYPE))


def corpus_load(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters,
    matcher: PhraseMatcher,
    cache: MatchCache | None = None,
) -> Corpus:
    """The observations of main-thread runs that a full compaction started, up to step
    MAX_STEP: one per operator message (hit = a phrase matched) and one per tool result of
    a harness that flags errors (hit = is_error). Steps count every call of the run; the
    filters then select which calls are observed. With a `cache` (PostgreSQL), only the
    prompts it holds no current match for are read and matched; it is extended in place
    for the caller to store."""
    if connection.vendor == "postgresql":
        return corpus_load_grouped(
            workspace=workspace, filters=filters, matcher=matcher, cache=cache
        )
    return corpus_load_rows(workspace=workspace, filters=filters, matcher=matcher, cache=cache)
