"""The facts of a call's text that behaviour after compaction reads (`text_facts`): the
prompt's kind, the operator's prompt and the counts of tool results and errors. The loader
writes them with the text; `text_facts_backfill` recomputes them for stored calls (the data
migration that added them, and `manage.py backfill_text_facts` after `message_kind`
changes)."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import zstandard
from django.db import connection, transaction

from traces.analysis.post_compaction import TextFacts, text_facts

FACT_COLUMNS = ("prompt_kind", "tool_results", "tool_errors")
FACT_TYPES = ("text", "int4", "int4")
BACKFILL_BATCH = 5000


def fact_values(facts: TextFacts) -> tuple[str, int, int]:
    """The Call columns of FACT_COLUMNS, in their order."""
    return (facts.prompt_kind, facts.tool_results, facts.tool_errors)


def fact_fields(facts: TextFacts) -> dict[str, object]:
    """The Call fields of FACT_COLUMNS by name."""
    return dict(zip(FACT_COLUMNS, fact_values(facts), strict=True))


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
            values = fact_values(facts)
            if list(values) != stored:
                changed.append(call_model(id=call_id, **fact_fields(facts)))
            if facts.operator_prompt is not None:
                prompts.append(
                    prompt_model(call_id=call_id, text=storable_prompt(facts.operator_prompt))
                )
        with transaction.atomic():
            call_model.objects.bulk_update(changed, list(FACT_COLUMNS), batch_size=1000)
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
