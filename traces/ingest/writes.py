"""The loader's writes: a batch's calls, their texts and compactions, bulk-loaded with
COPY into a staging table and merged with INSERT … ON CONFLICT on PostgreSQL (the ORM
elsewhere), keeping the line the streaming rule keeps."""

from __future__ import annotations

import threading
from functools import cached_property

import orjson
import zstandard
from django.db import IntegrityError, connection, transaction

from traces.analysis.post_compaction import PhraseMatcher, text_facts
from traces.formats.records import (
    CompactionRecord,
    SessionInfo,
)
from traces.formats.tools import tool_use_signatures
from traces.ingest.joins import (
    compactions_join,
    otlp_sessions_adopt,
    transcript_calls_join,
)
from traces.ingest.text_facts import (
    FACT_COLUMNS,
    FACT_TYPES,
    correction_matcher,
    fact_fields,
    fact_values,
    write_operator_prompts,
)
from traces.models import Call, CallText, Compaction, OperatorPrompt, Session

TEXT_COMPRESSOR_LEVEL = 3
CALL_COLUMNS = (
    "workspace_id", "session_id", "agent_id", "key", "session_index", "agent_index", "timestamp",
    "model", "input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens",
    "reasoning_tokens", "context_tokens", "is_sidechain", "tool_names", "touches", "source_line",
    "source_file_id", *FACT_COLUMNS, "cache_creation_1h_tokens",
)  # fmt: skip
# PostgreSQL types of CALL_COLUMNS, for binary COPY (varchar columns take text).
CALL_TYPES = (
    "int8", "int8", "int8", "text", "int4", "int4", "timestamptz", "text", "int8", "int8", "int8",
    "int8", "int8", "int8", "bool", "text", "text", "int4", "int8", *FACT_TYPES, "int8",
)  # fmt: skip
TEXT_TYPES = ("int8", "bytea")
# `kept_line_wins` in SQL, for a call already stored (`traces_call`) and a new line of it
# (`EXCLUDED`); on a tie the new line is kept only if it differs, so that reading the same
# call again writes nothing.
KEPT_LINE_RULE = (
    "(traces_call.is_sidechain AND NOT EXCLUDED.is_sidechain) OR "
    "(EXCLUDED.is_sidechain = traces_call.is_sidechain AND ("
    "EXCLUDED.output_tokens > traces_call.output_tokens OR "
    "(EXCLUDED.output_tokens = traces_call.output_tokens AND "
    "(EXCLUDED.input_tokens, EXCLUDED.cache_creation_tokens, EXCLUDED.cache_read_tokens, "
    "EXCLUDED.model) IS DISTINCT FROM (traces_call.input_tokens, "
    "traces_call.cache_creation_tokens, traces_call.cache_read_tokens, traces_call.model))))"
)
UPDATED_ON_CONFLICT = (
    "model", "input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens",
    "reasoning_tokens", "context_tokens", "is_sidechain", "tool_names", "touches", "source_line",
    "source_file_id", *FACT_COLUMNS, "cache_creation_1h_tokens",
)  # fmt: skip


class BatchWriter:
    """The flushing half of `TraceLoader`, which it is a base of: it works on the
    loader's state and is not used alone."""

    @cached_property
    def _correction_matcher(self) -> PhraseMatcher:
        """The workspace's correction phrases, read once per loader: each operator prompt's
        match is stored with it (a list saved meanwhile makes these matches stale)."""
        return correction_matcher(self.workspace.pk)

    def flush(self) -> None:
        calls, compactions = self._take_batch()
        if calls:
            rows, texts, late = self._call_rows(calls)
            for session_pk, _key in late:
                self._loaded_skipped.add(session_pk)  # its rows change: derive from the database
                self._loaded_rows.pop(session_pk, None)
            inserted, updated = self._write_calls(rows, texts, late)
            self._join_other_sources(rows, inserted)
            self._count_written(rows, inserted, updated)
        if compactions:
            self._upsert_compactions(compactions)

    def _take_batch(self) -> tuple[dict, list]:
        """The batch's calls by (session pk, key) and its compactions, taken off the loader,
        with the sessions and agents they belong to stored."""
        self._resolve_sessions()
        sessions = self._sessions
        calls = {
            (sessions[(harness, external)], key): record
            for (harness, external, key), record in self._calls.items()
        }
        compactions = self._compactions
        self._calls, self._compactions = {}, []
        wanted = {(session_pk, record.agent_id) for (session_pk, _), record in calls.items()}
        # Agents exist for their calls and compactions; an agent named by lines that made
        # no call (a subagent's prompt, a tool result) gets no row.
        wanted |= {(self._session_pk(c.harness, c.session_id), c.agent_id) for c in compactions}
        self._ensure_agents(wanted)
        return calls, compactions

    def _call_rows(self, calls: dict) -> tuple[list[tuple], dict, set]:
        """The rows of CALL_COLUMNS for the batch's calls, in session then time order with
        their indexes numbered on; their texts; and the calls the parser emitted before
        (`late`: they merge with the stored row)."""
        rows = []
        texts = {}
        late = set()
        agents = self._agents
        workspace_pk = self.workspace.pk
        self._prime_indexes({(s, agents[(s, record.agent_id)]) for (s, _), record in calls.items()})
        ordered = sorted(
            calls.items(), key=lambda item: (item[0][0], item[1].timestamp, item[1].line)
        )
        for (session_pk, _key), record in ordered:
            key = record.key
            agent_pk = agents[(session_pk, record.agent_id)]
            rows.append(
                (
                    workspace_pk,
                    session_pk,
                    agent_pk,
                    key,
                    self._next_index(session_pk, None),
                    self._next_index(session_pk, agent_pk),
                    record.timestamp,
                    record.model[:200],
                    record.input_tokens,
                    record.cache_creation_tokens,
                    record.cache_read_tokens,
                    record.output_tokens,
                    record.reasoning_tokens,
                    record.context_tokens,
                    record.is_sidechain,
                    _storable(" ".join(record.signature)),
                    _storable("\n".join(_touch_line(mode, path) for mode, path in record.touches))
                    if record.touches
                    else "",
                    record.line or None,
                    record.source_file_id,
                    *fact_values(text_facts(record.text), self._correction_matcher),
                    record.cache_creation_1h_tokens,
                )
            )
            texts[(session_pk, key)] = record.text
            if record.reemitted:
                late.add((session_pk, key))
        return rows, texts, late

    def _write_calls(self, rows: list[tuple], texts: dict, late: set) -> tuple[list, list]:
        """Store the rows and their texts in one transaction: on PostgreSQL new sessions'
        calls by COPY and the rest by a merge, elsewhere through the ORM. Returns the calls
        inserted and updated."""
        with transaction.atomic():
            if self._postgres:
                new_sessions = self._new_sessions
                fresh = [r for r in rows if r[1] in new_sessions and (r[1], r[3]) not in late]
                known = [r for r in rows if r[1] not in new_sessions or (r[1], r[3]) in late]
                inserted, updated = self._copy_new_calls(fresh, texts) if fresh else ([], [])
                if known:
                    more_inserted, more_updated = self._upsert_calls_copy(known)
                    self._store_texts(more_inserted, more_updated, texts)
                    inserted += more_inserted
                    updated += more_updated
            else:
                inserted, updated = self._upsert_calls_orm(rows)
                self._store_texts(inserted, updated, texts)
            if late:
                self._merge_late_texts(late, inserted, updated, texts)
        return inserted, updated

    def _count_written(self, rows: list[tuple], inserted: list, updated: list) -> None:
        """Add what the batch changed to the summary: calls added, and the token counts
        they added or a replaced line changed; note the sessions and files touched."""
        added = {key for key, _ in inserted}
        replaced = {key: old for key, _, old in updated}
        summary = self.summary
        summary.duplicates_dropped += len(rows) - len(added)  # calls stored before
        self.file_sessions.update({(row[18], row[1]) for row in rows if row[18] is not None})
        for row in rows:
            self.touched_sessions.add(row[1])
            name = (row[1], row[3])
            old = (0, 0, 0, 0) if name in added else replaced.get(name)
            if old is None:
                continue  # the stored call was kept
            summary.calls += name in added
            summary.input += row[8] - old[0]
            summary.cache_creation += row[9] - old[1]
            summary.cache_read += row[10] - old[2]
            summary.output += row[11] - old[3]

    def _join_other_sources(self, rows: list[tuple], inserted: list) -> None:
        """Other sources of these transcript calls (spans, events) may be stored already,
        in sessions this loader did not create: join them."""
        transcript = {(r[1], r[3]) for r in rows if r[17] is not None}
        # A session created here may have an `otlp` twin (other producers' spans sent
        # before it): it moves in, and its calls join as in an existing session.
        adopted = otlp_sessions_adopt(
            session_ids={name[0] for name in transcript if name[0] in self._new_sessions}
        )
        self._new_sessions -= adopted
        for session_pk in adopted:  # its rows changed: derive from the database
            self._loaded_skipped.add(session_pk)
            self._loaded_rows.pop(session_pk, None)
        written = {
            name: pk
            for name, pk in inserted
            if name in transcript and name[0] not in self._new_sessions
        }
        if written:
            with transaction.atomic():
                self.touched_sessions |= transcript_calls_join(written)

    def _copy_new_calls(self, rows: list[tuple], texts: dict) -> tuple[list, list]:
        """Sessions this loader created cannot hold these keys yet: COPY straight into the
        table with ids drawn from its sequence, and the texts with them. If another worker
        raced us to the same session, fall back to the merge."""
        from psycopg.errors import UniqueViolation

        with connection.cursor() as cursor:
            cursor.execute(
                # The subquery names the sequence once; called per row it cost 5× the nextvals.
                "SELECT nextval((SELECT pg_get_serial_sequence('traces_call', 'id'))::regclass) "
                "FROM generate_series(1, %s)",
                [len(rows)],
            )
            ids = [row[0] for row in cursor.fetchall()]
            columns = ", ".join(("id", *CALL_COLUMNS))
            compress = self._compressor.compress
            try:
                with transaction.atomic():
                    with cursor.cursor.copy(
                        f"COPY traces_call ({columns}) FROM STDIN (FORMAT BINARY)"
                    ) as copy:
                        copy.set_types(("int8", *CALL_TYPES))
                        for pk, row in zip(ids, rows, strict=True):
                            copy.write_row((pk, *row))
                    with cursor.cursor.copy(
                        "COPY traces_calltext (call_id, data) FROM STDIN (FORMAT BINARY)"
                    ) as copy:
                        copy.set_types(TEXT_TYPES)
                        for pk, row in zip(ids, rows, strict=True):
                            copy.write_row((pk, compress(orjson.dumps(texts[(row[1], row[3])]))))
                    write_operator_prompts(
                        _operator_prompts(
                            (pk, texts[(row[1], row[3])]) for pk, row in zip(ids, rows, strict=True)
                        )
                    )
            except (IntegrityError, UniqueViolation):  # the raw COPY raises psycopg's own error
                self._new_sessions -= {row[1] for row in rows}
                inserted, updated = self._upsert_calls_copy(rows)
                self._store_texts(inserted, updated, texts)
                return inserted, updated
        if self._derive_new:
            self._keep_for_derive(rows, ids)
        return [((row[1], row[3]), pk) for pk, row in zip(ids, rows, strict=True)], []

    def _upsert_calls_copy(self, rows: list[tuple]) -> tuple[list, list]:
        """COPY into a temporary table, then merge by the streaming rule. Returns the
        inserted ((session, key), id) and the updated ((session, key), id, old counts)."""
        columns = ", ".join(CALL_COLUMNS)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in UPDATED_ON_CONFLICT)
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE TEMP TABLE IF NOT EXISTS traces_call_stage ON COMMIT DELETE ROWS AS "
                f"SELECT {columns} FROM traces_call WITH NO DATA"
            )
            # Empty already after a commit, but not when an outer transaction holds several
            # flushes: stale rows would be merged again.
            cursor.execute("TRUNCATE traces_call_stage")
            raw = cursor.cursor
            with raw.copy(f"COPY traces_call_stage ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            # Both parts of the statement see the rows as they were before it: `old` gives
            # the counts an update replaced.
            merge = (  # column names are constants, not input
                "WITH old AS (SELECT c.id, c.input_tokens, c.cache_creation_tokens, "
                "c.cache_read_tokens, c.output_tokens FROM traces_call c JOIN traces_call_stage s "
                "ON c.session_id = s.session_id AND c.key = s.key), "
                f"merged AS (INSERT INTO traces_call ({columns}) SELECT {columns} "
                # In key order: two workers merging the same calls take their locks alike.
                f"FROM traces_call_stage ORDER BY session_id, key "
                f"ON CONFLICT (session_id, key) DO UPDATE SET {updates} "
                f"WHERE {KEPT_LINE_RULE} "
                "RETURNING id, session_id, key, (xmax = 0) AS inserted) "
                "SELECT m.id, m.session_id, m.key, m.inserted, o.input_tokens, "
                "o.cache_creation_tokens, o.cache_read_tokens, o.output_tokens "
                "FROM merged m LEFT JOIN old o ON o.id = m.id"
            )
            cursor.execute(merge)
            returned = cursor.fetchall()
        inserted = [((row[1], row[2]), row[0]) for row in returned if row[3]]
        updated = [((row[1], row[2]), row[0], row[4:8]) for row in returned if not row[3]]
        return inserted, updated

    def _upsert_calls_orm(self, rows: list[tuple]) -> tuple[list, list]:
        by_session: dict[int, list[tuple]] = {}
        for row in rows:
            by_session.setdefault(row[1], []).append(row)
        inserted, updated = [], []
        for session_pk, session_rows in by_session.items():
            keys = [row[3] for row in session_rows]
            existing = {}
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                stored_rows = Call.objects.filter(session_id=session_pk, key__in=chunk)
                existing.update(
                    {stored[1]: stored for stored in stored_rows.values_list(*STORED_COLUMNS)}
                )
            new_objects = []
            for row in session_rows:
                values = dict(zip(CALL_COLUMNS, row, strict=True))
                match = existing.get(row[3])
                if match is None:
                    new_objects.append(Call(**values))
                elif _replaces_stored(row, match):
                    Call.objects.filter(pk=match[0]).update(
                        **{c: values[c] for c in UPDATED_ON_CONFLICT}
                    )
                    updated.append(((session_pk, row[3]), match[0], match[2:6]))
            for obj in Call.objects.bulk_create(new_objects, batch_size=500):
                inserted.append(((session_pk, obj.key), obj.pk))
        return inserted, updated

    def _store_texts(self, inserted: list, updated: list, texts: dict) -> None:
        compress = self._compressor.compress
        new_rows = [(pk, compress(orjson.dumps(texts[key]))) for key, pk in inserted]
        if self._postgres and new_rows:
            with (
                connection.cursor() as cursor,
                cursor.cursor.copy("COPY traces_calltext (call_id, data) FROM STDIN") as copy,
            ):
                for row in new_rows:
                    copy.write_row(row)
        elif new_rows:
            CallText.objects.bulk_create(
                [CallText(call_id=pk, data=data) for pk, data in new_rows], batch_size=500
            )
        write_operator_prompts(_operator_prompts((pk, texts[key]) for key, pk in inserted))
        if updated:
            self._merge_stored_texts([(key, pk) for key, pk, _ in updated], texts)

    def _merge_late_texts(self, late: set, inserted: list, updated: list, texts: dict) -> None:
        """A late line that lost to the stored call still adds the content blocks it holds."""
        handled = {key for key, _ in inserted} | {key for key, _, _ in updated}
        kept = late - handled
        if not kept:
            return
        found = []
        for session_pk, key in kept:
            pk = Call.objects.filter(session_id=session_pk, key=key).values_list("pk", flat=True)
            found += [((session_pk, key), call_pk) for call_pk in pk]
        self._merge_stored_texts(found, texts)

    def _merge_stored_texts(self, calls: list[tuple[tuple, int]], texts: dict) -> None:
        """A stored call that a later line of it changed keeps the content of both: its
        stored blocks, then the new ones; its signature and touches follow the merged blocks."""
        stored = {
            call_id: decompress_text(data)
            for call_id, data in CallText.objects.filter(
                call_id__in=[pk for _, pk in calls]
            ).values_list("call_id", "data")
        }
        compress = self._compressor.compress
        for key, pk in calls:
            earlier = stored.get(pk)
            text = texts[key]
            if earlier is not None:
                blocks = earlier.get("blocks") or []
                added = [b for b in text.get("blocks") or [] if b not in blocks]
                text = {**earlier, **text, "blocks": blocks + added}
                results = {**(earlier.get("results") or {}), **(text.get("results") or {})}
                if results:
                    text["results"] = results
                if earlier.get("prompt"):
                    text["prompt"] = earlier["prompt"]
                names, touches = tool_columns(text["blocks"])
                Call.objects.filter(pk=pk).update(tool_names=names, touches=touches)
            CallText.objects.update_or_create(
                call_id=pk, defaults={"data": compress(orjson.dumps(text))}
            )
            # The facts follow the merged text, whichever line's columns the call kept.
            facts = text_facts(text)
            Call.objects.filter(pk=pk).update(**fact_fields(facts, self._correction_matcher))
            if facts.operator_prompt is None:
                OperatorPrompt.objects.filter(call_id=pk).delete()
            else:
                write_operator_prompts([(pk, facts.operator_prompt)], replace=True)

    def _upsert_compactions(self, compactions: list[CompactionRecord]) -> None:
        objects = {}
        for record in compactions:
            session_pk = self._session_pk(record.harness, record.session_id)
            objects[(session_pk, record.key)] = Compaction(
                workspace=self.workspace,
                session_id=session_pk,
                agent_id=self._agent_pk(session_pk, record.agent_id),
                key=record.key,
                kind=record.kind,
                timestamp=record.timestamp,
                trigger=record.trigger,
                pre_tokens=record.pre_tokens,
                post_tokens=record.post_tokens,
                summary_tokens=record.summary_tokens,
                summary_estimated=record.summary_estimated,
                duration_ms=record.duration_ms,
                source_line=record.line or None,
            )
        sessions = {session_pk for session_pk, _ in objects}
        inserted = _upsert_counting_inserts(
            Compaction,
            list(objects.values()),
            unique_fields=["session", "key"],
            update_fields=[
                "agent", "kind", "timestamp", "trigger", "pre_tokens", "post_tokens", "summary_tokens",
                "summary_estimated", "duration_ms", "source_line",
            ],
            count_new=lambda: len(set(objects) - self._compaction_keys_stored(objects, sessions)),
        )  # fmt: skip
        self._compaction_keys |= set(objects)
        self.summary.compactions += inserted
        self.touched_sessions |= sessions
        known = sessions - self._new_sessions
        if known:  # the same compaction from events or spans, stored before
            with transaction.atomic():
                compactions_join(workspace_id=self.workspace.pk, session_ids=known)

    def _compaction_keys_stored(self, objects: dict, sessions: set[int]) -> set:
        if sessions <= self._new_sessions:  # only this loader has written to these sessions
            return self._compaction_keys & set(objects)
        return set(
            Compaction.objects.filter(
                session_id__in=sessions, key__in=[k for _, k in objects]
            ).values_list("session_id", "key")
        )


STORED_COLUMNS = (
    "id", "key", "input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens",
    "is_sidechain", "model",
)  # fmt: skip


def _replaces_stored(row: tuple, stored: tuple) -> bool:
    """KEPT_LINE_RULE for a call row and the stored (id, key, input, cache creation, cache
    read, output, is_sidechain, model)."""
    if row[14] != stored[6]:
        return not row[14]
    if row[11] != stored[5]:
        return row[11] > stored[5]
    return (row[8], row[9], row[10], row[7]) != (stored[2], stored[3], stored[4], stored[7])


def _operator_prompts(texts) -> list[tuple[int, str]]:
    """(call id, prompt) for the (call id, text) pairs whose prompt an operator typed."""
    rows = []
    for pk, text in texts:
        prompt = text_facts(text).operator_prompt
        if prompt is not None:
            rows.append((pk, prompt))
    return rows


def tool_columns(blocks: list[dict]) -> tuple[str, str]:
    """The `tool_names` and `touches` columns for a call's content blocks."""
    names, touches = tool_use_signatures(blocks)
    return (
        _storable(" ".join(names)),
        _storable("\n".join(_touch_line(mode, path) for mode, path in touches)),
    )


def _storable(text: str) -> str:
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _touch_line(mode: str, path: str) -> str:
    # One touch per line, mode and path split by a tab: neither may appear in the path.
    if "\n" in path or "\t" in path:
        path = path.replace("\n", " ").replace("\t", " ")
    return f"{mode}\t{path}"


def _insert_missing(model, objects: list) -> int | None:
    """INSERT … ON CONFLICT DO NOTHING; how many rows this statement inserted, where the
    database says (PostgreSQL), else None (Django's bulk_create cannot tell)."""
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objects, ignore_conflicts=True)
        return None
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    rows = [
        [f.get_db_prep_save(f.pre_save(obj, add=True), connection) for f in fields]
        for obj in objects
    ]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    values = ", ".join(["(" + ", ".join(["%s"] * len(fields)) + ")"] * len(rows))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {model._meta.db_table} ({columns}) VALUES {values} "
            "ON CONFLICT DO NOTHING RETURNING 1",
            [value for row in rows for value in row],
        )
        return len(cursor.fetchall())


def _upsert_counting_inserts(
    model, objects: list, *, unique_fields: list[str], update_fields: list[str], count_new
) -> int:
    """INSERT … ON CONFLICT DO UPDATE; how many of the rows were new.

    On PostgreSQL the statement itself says (`xmax = 0` marks a row it inserted), so two
    workers upserting the same row count it once. Elsewhere (one writer at a time)
    `count_new()`, called before the write, counts the rows not stored yet.
    """
    if connection.vendor != "postgresql":
        new = count_new()
        with transaction.atomic():
            model.objects.bulk_create(
                objects,
                update_conflicts=True,
                unique_fields=unique_fields,
                update_fields=update_fields,
            )
        return new
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    rows = [
        [f.get_db_prep_save(f.pre_save(obj, add=True), connection) for f in fields]
        for obj in objects
    ]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    values = ", ".join(["(" + ", ".join(["%s"] * len(fields)) + ")"] * len(rows))
    conflict = ", ".join(quote(model._meta.get_field(name).column) for name in unique_fields)
    updates = ", ".join(
        f"{quote(column)} = EXCLUDED.{quote(column)}"
        for column in (model._meta.get_field(name).column for name in update_fields)
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {model._meta.db_table} ({columns}) VALUES {values} "
            f"ON CONFLICT ({conflict}) DO UPDATE SET {updates} RETURNING (xmax = 0)",
            [value for row in rows for value in row],
        )
        return sum(1 for (was_inserted,) in cursor.fetchall() if was_inserted)


def _get_or_create(model, defaults=None, **lookup):
    """get_or_create that survives a concurrent insert of the same natural key."""
    try:
        with transaction.atomic():
            return model.objects.get_or_create(defaults=defaults or {}, **lookup)
    except IntegrityError:
        return model.objects.get(**lookup), False


def _apply_session_info(session_pk: int, info: SessionInfo) -> None:
    updates = {
        name: getattr(info, name)[:limit]
        for name, limit in (
            ("project", 1000),
            ("git_branch", 300),
            ("harness_version", 64),
            ("title", 500),
        )
        if getattr(info, name)
    }
    if updates:
        Session.objects.filter(pk=session_pk).update(**updates)


_DECOMPRESSORS = threading.local()  # a ZstdDecompressor may not be shared between threads


def decompress_text(data: bytes | memoryview) -> dict:
    """A call's stored text. The decompressor is reused: making one costs more than most
    texts take to decompress."""
    decompressor = getattr(_DECOMPRESSORS, "zstd", None)
    if decompressor is None:
        decompressor = _DECOMPRESSORS.zstd = zstandard.ZstdDecompressor()
    return orjson.loads(decompressor.decompress(bytes(data)))
