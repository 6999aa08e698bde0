"""Reads for behaviour after compaction: the workspace's correction phrase list and the
observations (operator messages, tool results) by step since the last compaction. On
PostgreSQL they are grouped in the database from the facts stored at derive time
(`post_compaction_grouped`); elsewhere read call by call (`post_compaction_rows`). Each
operator prompt's match is stored with it at ingest (`Call.correction_phrase`) under the
phrase list then current; stale ones are matched again here and returned for storing."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from governance.models import Workspace
from traces.analysis.post_compaction import (
    DEFAULT_PHRASE_VERSION,
    DEFAULT_PHRASES,
    Corpus,
    PhraseMatcher,
)
from traces.analytics.models import CorrectionPhraseList
from traces.analytics.post_compaction_grouped import corpus_load_grouped
from traces.analytics.post_compaction_rows import (
    MAX_MATCHES,
    Rematched,
    _match_row,
    corpus_load_rows,
)
from traces.analytics.selectors import AnalyticsFilters

__all__ = ["MAX_MATCHES", "Rematched", "_match_row", "corpus_load"]


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


def corpus_load(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters,
    matcher: PhraseMatcher,
    rematched: Rematched | None = None,
) -> Corpus:
    """The observations of main-thread runs that a full compaction started, up to step
    MAX_STEP: one per operator message (hit = a phrase matched) and one per tool result of
    a harness that flags errors (hit = is_error). Steps count every call of the run; the
    filters then select which calls are observed. With `rematched`, prompts whose stored
    match is stale are matched again and collected in it, for the caller to store; without,
    every prompt is matched now."""
    load = corpus_load_grouped if connection.vendor == "postgresql" else corpus_load_rows
    return load(workspace=workspace, filters=filters, matcher=matcher, rematched=rematched)
