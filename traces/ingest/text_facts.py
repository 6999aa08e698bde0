"""The facts of a call's text that behaviour after compaction reads (`text_facts`): the
prompt's kind, the operator's prompt and the counts of tool results and errors. The loader
writes them with the text; `text_facts_backfill` recomputes them for stored calls (the data
migration that added them, and `manage.py backfill_text_facts` after `message_kind`
changes)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import orjson
import zstandard
from django.db import connection, transaction

from traces.analysis.post_compaction import DEFAULT_PHRASES, PhraseMatcher, TextFacts, text_facts

FACT_COLUMNS = ("prompt_kind", "tool_results", "tool_errors", "correction_phrase", "correction_key")
FACT_TYPES = ("text", "int4", "int4", "int2", "int8")
BACKFILL_BATCH = 5000


def fact_values(facts: TextFacts, matcher: PhraseMatcher | None) -> tuple:
    """The Call columns of FACT_COLUMNS, in their order: the operator prompt is matched
    with the workspace's current phrases (`matcher`); without one, or without an operator
    prompt, the match is left unset (None: matched when the section next needs it)."""
    phrase = key = None
    if facts.operator_prompt is not None and matcher is not None:
        phrase, key = matcher.phrase_index(facts.operator_prompt), matcher.key
    return (facts.prompt_kind, facts.tool_results, facts.tool_errors, phrase, key)


def fact_fields(facts: TextFacts, matcher: PhraseMatcher | None) -> dict[str, object]:
    """The Call fields of FACT_COLUMNS by name."""
    return dict(zip(FACT_COLUMNS, fact_values(facts, matcher), strict=True))


@lru_cache(maxsize=64)
def _matcher(phrases: tuple[str, ...]) -> PhraseMatcher:
    return PhraseMatcher(phrases)


def correction_matcher(workspace_id: int) -> PhraseMatcher:
    """The matcher of the workspace's current correction phrases (the shipped default
    until a version is saved), which the loader stores each operator prompt's match with."""
    from traces.analytics.models import CorrectionPhraseList

    phrases = (
        CorrectionPhraseList.objects.filter(workspace_id=workspace_id)
        .order_by("-version")
        .values_list("phrases", flat=True)
        .first()
    )
    return _matcher(tuple(DEFAULT_PHRASES if phrases is None else phrases))


def storable_prompt(text: str) -> str:
    # PostgreSQL text holds no NUL; the replacement keeps every other character's position.
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def write_operator_prompts(rows: list[tuple[int, str]], *, replace: bool = False) -> None:
    """Store (call id, prompt) rows; `replace` for calls that may hold one already."""
    from traces.models import OperatorPrompt

    if not rows:
        return
    rows = [(pk, storable_prompt(text)) for pk, text in rows]
    if connection.vendor == "postgresql" and not replace:
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy("COPY traces_operatorprompt (call_id, text) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        return
    objects = [OperatorPrompt(call_id=pk, text=text) for pk, text in rows]
    if replace:
        OperatorPrompt.objects.bulk_create(
            objects,
            batch_size=500,
            update_conflicts=True,
            unique_fields=["call"],
            update_fields=["text"],
        )
    else:
        OperatorPrompt.objects.bulk_create(objects, batch_size=500)


def text_facts_backfill(
    call_model,
    text_model,
    prompt_model,
    *,
    workspace_id: int | None = None,
    batch: int = BACKFILL_BATCH,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Recompute every stored call's facts from its text, writing only what differs.
    Takes the models so that a migration can pass its historical ones. One transaction
    per batch of texts, in call id order; safe to interrupt and run again."""
    decompressor = zstandard.ZstdDecompressor()
    # A migration's historical model may predate the match columns.
    known = {field.name for field in call_model._meta.get_fields()}
    columns = [column for column in FACT_COLUMNS if column in known]
    texts = text_model.objects.order_by("call_id")
    if workspace_id is not None:
        texts = texts.filter(call__workspace_id=workspace_id)
    last = 0
    counts = {"calls": 0, "updated": 0, "operator_prompts": 0}
    while True:
        rows = list(
            texts.filter(call_id__gt=last).values_list(
                "call_id", "data", "call__prompt_kind", "call__tool_results", "call__tool_errors"
            )[:batch]
        )
        if not rows:
            return counts
        last = rows[-1][0]
        changed, prompts = [], []
        for call_id, data, *stored in rows:
            facts = text_facts(orjson.loads(decompressor.decompress(bytes(data))))
            if list(fact_values(facts, None)[:3]) != stored:  # its match is then unset
                fields = fact_fields(facts, None)
                changed.append(call_model(id=call_id, **{f: fields[f] for f in columns}))
            if facts.operator_prompt is not None:
                prompts.append(
                    prompt_model(call_id=call_id, text=storable_prompt(facts.operator_prompt))
                )
        with transaction.atomic():
            call_model.objects.bulk_update(changed, columns, batch_size=1000)
            prompt_model.objects.filter(call_id__in=[r[0] for r in rows]).exclude(
                call_id__in=[p.call_id for p in prompts]
            ).delete()
            prompt_model.objects.bulk_create(
                prompts,
                batch_size=500,
                update_conflicts=True,
                unique_fields=["call"],
                update_fields=["text"],
            )
        counts["calls"] += len(rows)
        counts["updated"] += len(changed)
        counts["operator_prompts"] += len(prompts)
        if progress:
            progress(counts["calls"])
