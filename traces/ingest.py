"""Load parsed trace records into the database, idempotently and in batches.

Each batch is its own transaction and every write is keyed by a natural key
(session + call key, session + compaction key), so a killed worker leaves no half state
and a retry finishes the job. Calls are upserted keeping the larger `output_tokens`
(the streaming rule across batches and files); on PostgreSQL they are bulk-loaded with
COPY into a staging table and merged with INSERT … ON CONFLICT.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import orjson
import zstandard
from django.db import IntegrityError, connection, transaction
from django.db.models import Max

from governance.models import Workspace
from traces.formats.records import (
    MAX_TOKEN_COUNT,
    AgentInfo,
    CallRecord,
    CompactionRecord,
    ParseError,
    SessionInfo,
    implausible_counts,
    merge_call_records,
)
from traces.formats.tools import tool_use_signatures
from traces.models import Agent, AgentKind, Call, CallText, Compaction, Session

BATCH_SIZE = 5000
SESSION_ID_LENGTH = 200  # Session.external_id's max_length
# A loader derives the sessions it created itself while their call rows fit in this many
# rows of memory; beyond it, the derive step reads them back from the database instead.
LOADED_DERIVE_MAX_CALLS = 100_000
TEXT_COMPRESSOR_LEVEL = 3
CALL_COLUMNS = (
    "workspace_id", "session_id", "agent_id", "key", "session_index", "agent_index", "timestamp",
    "model", "input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens",
    "reasoning_tokens", "context_tokens", "is_sidechain", "tool_names", "touches", "source_line",
    "source_file_id",
)  # fmt: skip
# PostgreSQL types of CALL_COLUMNS, for binary COPY (varchar columns take text).
CALL_TYPES = (
    "int8", "int8", "int8", "text", "int4", "int4", "timestamptz", "text", "int8", "int8", "int8",
    "int8", "int8", "int8", "bool", "text", "text", "int4", "int8",
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
    "source_file_id",
)  # fmt: skip


@dataclass
class IngestSummary:
    """What one ingest added. `as_dict()` is the CLI's --json shape."""

    files: int = 0
    sessions: int = 0
    agents: int = 0
    calls: int = 0
    duplicates_dropped: int = 0
    malformed_lines: int = 0
    compactions: int = 0
    input: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output: int = 0
    errors: list[dict] = field(default_factory=list)
    skipped_files: int = 0
    derived_sessions: set[int] = field(default_factory=set)  # derived by their loader

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "sessions": self.sessions,
            "agents": self.agents,
            "calls": self.calls,
            "duplicates_dropped": self.duplicates_dropped,
            "malformed_lines": self.malformed_lines,
            "compactions": self.compactions,
            "tokens": {
                "input": self.input,
                "cache_creation": self.cache_creation,
                "cache_read": self.cache_read,
                "output": self.output,
            },
            "errors": self.errors,
        }

    def merge(self, other: IngestSummary) -> None:
        for name in (
            "files", "sessions", "agents", "calls", "duplicates_dropped", "malformed_lines",
            "compactions", "input", "cache_creation", "cache_read", "output", "skipped_files",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.extend(other.errors)
        self.derived_sessions |= other.derived_sessions

    def counts(self) -> dict:
        data = self.as_dict()
        tokens = data.pop("tokens")
        data.pop("errors")
        data.update({f"tokens_{k}": v for k, v in tokens.items()})
        data["files_already_ingested"] = self.skipped_files
        return data


class TraceLoader:
    """Feed records from one parsed file; `finish()` flushes and returns the ids of the
    sessions it touched that still need the derive step.

    With `derive_new_sessions`, sessions this loader created, whose calls all arrived in
    time order, are derived by `finish()` from the rows it wrote (their ids go to
    `summary.derived_sessions`), which saves reading every call back. A session that
    another file also touches is returned by that file's loader and derived again from
    the database, so the result does not depend on the order files are read in.
    """

    def __init__(
        self,
        *,
        workspace: Workspace,
        summary: IngestSummary,
        file_name: str,
        batch_size: int | None = None,
        derive_new_sessions: bool = False,
        mark_new_sessions: bool = False,
    ):
        self.workspace = workspace
        # Sessions this loader inserts start with needs_derive set (OTLP: derived later).
        self.mark_new_sessions = mark_new_sessions
        self.created_sessions: set[int] = set()
        self.summary = summary
        self.file_name = file_name
        self.source_file_id: int | None = None  # the IngestedFile being read, if any
        self.batch_size = batch_size or BATCH_SIZE
        self._sessions: dict[tuple[str, str], int] = {}
        self._session_updates: dict[int, SessionInfo] = {}
        self._agents: dict[tuple[int, str], int] = {}
        self._pending_agents: dict[tuple[int, str], AgentInfo] = {}
        self._waiting_infos: dict[tuple[str, str], list[SessionInfo]] = {}
        self._waiting_agents: dict[tuple[str, str, str], AgentInfo] = {}
        self._calls: dict[tuple[str, str, str], CallRecord] = {}
        self._compactions: list[CompactionRecord] = []
        self.touched_sessions: set[int] = set()
        self._new_sessions: set[int] = set()
        self._created_with: dict[int, SessionInfo] = {}
        self._indexes: dict[tuple[int, int | None], int] = {}
        self._compressor = zstandard.ZstdCompressor(level=TEXT_COMPRESSOR_LEVEL)
        self._postgres = connection.vendor == "postgresql"
        self._derive_new = derive_new_sessions and self._postgres
        self._loaded_rows: dict[int, list[tuple]] = {}  # fresh session -> derive rows
        self._loaded_last: dict[int, tuple] = {}  # fresh session -> last (timestamp, line)
        self._loaded_skipped: set[int] = set()
        self._loaded_count = 0
        self._compaction_keys: set[tuple[int, str]] = set()
        self._new_agents: set[int] = set()  # created by this loader: no calls before ours

    # --- feeding -----------------------------------------------------------------

    def feed(self, record) -> None:
        # Sessions are looked up or created in bulk at the next flush, by name until then.
        if type(record) is not CallRecord or _needs_fitting(record):
            _fit_for_columns(record)
        if isinstance(record, CallRecord):
            record.source_file_id = self.source_file_id
            largest = max(
                record.input_tokens,
                record.cache_creation_tokens,
                record.cache_read_tokens,
                record.output_tokens,
                record.reasoning_tokens,
            )
            if largest > MAX_TOKEN_COUNT:
                self._reject_counts(record, implausible_counts(record))
                return
            key = (record.harness, record.session_id, record.key)
            existing = self._calls.get(key)
            if existing is None:
                self._calls[key] = record
            else:
                self.summary.duplicates_dropped += 1  # in another file, or re-emitted
                self._calls[key] = merge_call_records(existing, record)
            if len(self._calls) >= self.batch_size:
                self.flush()
        elif isinstance(record, ParseError):
            self.summary.errors.append(
                {"file": self.file_name, "line": record.line, "error": record.message}
            )
        elif isinstance(record, SessionInfo):
            name = (record.harness, record.external_id)
            session_pk = self._sessions.get(name)
            if session_pk is None:
                self._waiting_infos.setdefault(name, []).append(record)
            else:
                self._note_info(session_pk, record)
        elif isinstance(record, AgentInfo):
            name = (record.harness, record.session_id)
            self._waiting_agents[(*name, record.agent_id)] = record
        elif isinstance(record, CompactionRecord):
            implausible = implausible_counts(record)
            if implausible:
                self._reject_counts(record, implausible)
                for name in implausible:
                    setattr(record, name, None)  # the boundary itself is kept
            self._compactions.append(record)

    def _reject_counts(self, record: CallRecord | CompactionRecord, names: list[str]) -> None:
        fields = ", ".join(f"{name} = {getattr(record, name)}" for name in names)
        kept = "call skipped" if isinstance(record, CallRecord) else "value dropped"
        self.summary.malformed_lines += 1
        self.summary.errors.append(
            {
                "file": self.file_name,
                "line": record.line or None,
                "error": f"{fields}: not a plausible count (over {MAX_TOKEN_COUNT:,}); {kept}",
            }
        )

    def _note_info(self, session_pk: int, info: SessionInfo) -> None:
        if self._created_with.get(session_pk) == info:
            return  # the session was created with exactly this information
        previous = self._session_updates.get(session_pk)
        self._session_updates[session_pk] = _merge_info(previous, info)

    def _resolve_sessions(self) -> None:
        """Look up or create, in bulk, every session named since the last flush."""
        names = {(harness, external) for harness, external, _ in self._calls}
        names |= {(c.harness, c.session_id) for c in self._compactions}
        names |= {(harness, external) for harness, external, _ in self._waiting_agents}
        names |= set(self._waiting_infos)
        names -= set(self._sessions)
        if names:
            infos = self._waiting_infos
            self.prepare_sessions(
                [infos[name][0] if name in infos else SessionInfo(*name) for name in names]
            )
        for name, waiting in self._waiting_infos.items():
            for info in waiting:
                self._note_info(self._sessions[name], info)
        for (harness, external, agent_id), info in self._waiting_agents.items():
            self._pending_agents[(self._sessions[(harness, external)], agent_id)] = info
        self._waiting_infos, self._waiting_agents = {}, {}

    def finish(self) -> set[int]:
        self.flush()
        if self._session_updates:
            with transaction.atomic():
                # In id order, as the derive step locks sessions.
                for session_pk, info in sorted(self._session_updates.items()):
                    _apply_session_info(session_pk, info)
            self._session_updates.clear()
        loaded = {pk: rows for pk, rows in self._loaded_rows.items() if pk in self._new_sessions}
        self._loaded_rows, self._loaded_last, self._loaded_skipped = {}, {}, set()
        if loaded:
            from traces.derive import sessions_derive_loaded

            with transaction.atomic():
                sessions_derive_loaded(workspace_id=self.workspace.pk, calls=loaded)
            self.summary.derived_sessions |= set(loaded)
        return self.touched_sessions - set(loaded)

    def _keep_for_derive(self, rows: list[tuple], ids: list[int]) -> None:
        """Remember a fresh batch's calls for `finish()`, or give up on a session whose
        calls arrived out of time order (its positions need the re-index)."""
        loaded, last, skipped = self._loaded_rows, self._loaded_last, self._loaded_skipped
        for pk, row in zip(ids, rows, strict=True):
            session_pk = row[1]
            if session_pk in skipped:
                continue
            order = (row[6], row[17] or 0)  # timestamp, source line: the re-index order
            previous = last.get(session_pk)
            if previous is not None and order < previous:
                skipped.add(session_pk)
                loaded.pop(session_pk, None)
                continue
            last[session_pk] = order
            loaded.setdefault(session_pk, []).append(
                (pk, row[2], row[4], row[6], row[13], row[8], row[9], row[10], row[11],
                 row[15], row[16], row[7])
            )  # fmt: skip
        self._loaded_count += len(rows)
        if self._loaded_count > LOADED_DERIVE_MAX_CALLS:
            self._derive_new = False
            self._loaded_rows = {}

    # --- sessions and agents -------------------------------------------------------

    def _session_pk(self, harness: str, external_id: str, info: SessionInfo | None = None) -> int:
        cache_key = (harness, external_id)
        pk = self._sessions.get(cache_key)
        if pk is not None:
            return pk
        defaults = {}
        if info is not None:
            defaults = {
                "project": info.project[:1000],
                "git_branch": info.git_branch[:300],
                "harness_version": info.harness_version[:64],
                "title": info.title[:500],
            }
        if self.mark_new_sessions:
            defaults["needs_derive"] = True
        session, created = _get_or_create(
            Session,
            workspace=self.workspace,
            harness=harness,
            external_id=external_id,
            defaults=defaults,
        )
        if created:
            self.created_sessions.add(session.pk)
            self.summary.sessions += 1
            self._new_sessions.add(session.pk)
            if info is not None:
                self._created_with[session.pk] = info
        self._sessions[cache_key] = session.pk
        self.touched_sessions.add(session.pk)
        return session.pk

    def prepare_sessions(self, infos: list[SessionInfo]) -> None:
        """Get or create many sessions in three statements; the first info of each is what
        a created session starts with."""
        for info in infos:
            _fit_for_columns(info)  # as feed() does, so both name a session alike
        wanted = {
            (i.harness, i.external_id): i
            for i in infos
            if (i.harness, i.external_id) not in self._sessions
        }
        if not wanted:
            return
        external_ids = [external for _, external in wanted]
        existing = Session.objects.filter(
            workspace=self.workspace, external_id__in=external_ids
        ).values_list("harness", "external_id", "id")
        for harness, external, pk in existing:
            if (harness, external) in wanted:
                self._sessions[(harness, external)] = pk
                self.touched_sessions.add(pk)
        missing = [
            Session(
                workspace=self.workspace, harness=harness, external_id=external, project=info.project[:1000],
                git_branch=info.git_branch[:300], harness_version=info.harness_version[:64], title=info.title[:500],
                needs_derive=self.mark_new_sessions,
            )
            for (harness, external), info in wanted.items()
            if (harness, external) not in self._sessions
        ]  # fmt: skip
        if not missing:
            return
        try:
            with transaction.atomic():
                Session.objects.bulk_create(missing)
        except IntegrityError:  # a concurrent loader created one of them: fall back one by one
            for session in missing:
                name = (session.harness, session.external_id)
                self._session_pk(*name, wanted[name])
            return
        for session in missing:
            self._sessions[(session.harness, session.external_id)] = session.pk
            self.created_sessions.add(session.pk)
            self._new_sessions.add(session.pk)
            self.touched_sessions.add(session.pk)
            self._created_with[session.pk] = wanted[(session.harness, session.external_id)]
        self.summary.sessions += len(missing)

    def _agent_pk(self, session_pk: int, agent_id: str) -> int:
        pk = self._agents.get((session_pk, agent_id))
        if pk is None:
            self._ensure_agents({(session_pk, agent_id)})
            pk = self._agents[(session_pk, agent_id)]
        return pk

    def _ensure_agents(self, wanted: set[tuple[int, str]]) -> None:
        """Create or fetch agents in bulk: main agents first, since subagents point to them."""
        missing = {pair for pair in wanted if pair not in self._agents}
        for session_pk, agent_id in list(missing):
            info = self._pending_agents.get((session_pk, agent_id))
            if agent_id != "main":
                missing.add((session_pk, (info.parent_agent_id if info else None) or "main"))
        missing -= set(self._agents)
        if not missing:
            return
        for parents_first in (True, False):
            level = {pair for pair in missing if (pair[1] == "main") == parents_first}
            if not level:
                continue
            # Agents of sessions this loader created cannot exist yet: no need to look.
            self._fetch_agents({pair for pair in level if pair[0] not in self._new_sessions})
            to_create = [self._agent_object(pair) for pair in level - set(self._agents)]
            fresh = [a for a in to_create if a.session_id in self._new_sessions]
            known = [a for a in to_create if a.session_id not in self._new_sessions]
            if fresh:
                try:
                    with transaction.atomic():
                        Agent.objects.bulk_create(fresh)  # ids come back (RETURNING)
                except IntegrityError:  # another worker reached these sessions too
                    self._new_sessions -= {a.session_id for a in fresh}
                    for agent in fresh:
                        agent.pk = None
                    known += fresh
                else:
                    for agent in fresh:
                        self._agents[(agent.session_id, agent.external_id)] = agent.pk
                        self._new_agents.add(agent.pk)
                    self.summary.agents += len(fresh)
            if known:
                with transaction.atomic():
                    created = _insert_missing(Agent, known)
                found = self._fetch_agents({(a.session_id, a.external_id) for a in known})
                # Another worker may have created some of them meanwhile: count ours only.
                self.summary.agents += found if created is None else created

    def _agent_object(self, pair: tuple[int, str]) -> Agent:
        session_pk, agent_id = pair
        info = self._pending_agents.get(pair)
        parent_pk = None
        if agent_id != "main":
            parent_key = (session_pk, (info.parent_agent_id if info else None) or "main")
            parent_pk = self._agents.get(parent_key) or self._agents.get((session_pk, "main"))
        return Agent(
            workspace=self.workspace,
            session_id=session_pk,
            external_id=agent_id[:200],
            kind=AgentKind.MAIN
            if agent_id == "main"
            else (info.kind if info else AgentKind.SUBAGENT),
            parent_id=parent_pk,
            agent_type=(info.agent_type if info else "")[:200],
            description=info.description if info else "",
            spawn_tool_call_id=(info.spawn_tool_call_id if info else "")[:200],
            start_kind=info.start_kind if info else "unknown",
        )

    def _prime_indexes(self, pairs: set[tuple[int, int]]) -> None:
        """Start the counters of sessions and agents that may hold calls already, with two
        queries for a whole batch (one per session or agent cost 1 ms each on many small
        subagent files)."""
        sessions = {s for s, _ in pairs if (s, None) not in self._indexes}
        sessions -= self._new_sessions
        agents = {
            a for s, a in pairs if (s, a) not in self._indexes and s not in self._new_sessions
        }
        agents -= self._new_agents
        found = {}
        if sessions:
            for session_pk, top in (
                Call.objects.filter(session_id__in=sessions)
                .values_list("session_id")
                .annotate(top=Max("session_index"))
            ):
                found[(session_pk, None)] = top + 1
        if agents:
            for agent_pk, session_pk, top in (
                Call.objects.filter(agent_id__in=agents)
                .values_list("agent_id", "session_id")
                .annotate(top=Max("agent_index"))
            ):
                found[(session_pk, agent_pk)] = top + 1
        for session_pk in sessions:
            self._indexes[(session_pk, None)] = found.get((session_pk, None), 0)
        for session_pk, agent_pk in pairs:
            if agent_pk in agents:
                self._indexes[(session_pk, agent_pk)] = found.get((session_pk, agent_pk), 0)

    def _next_index(self, session_pk: int, agent_pk: int | None) -> int:
        """Provisional positions in arrival order; the derive step corrects any that differ,
        which for a single transcript in time order is none, so no row is rewritten."""
        counter_key = (session_pk, agent_pk)
        value = self._indexes.get(counter_key)
        if value is None:
            if session_pk in self._new_sessions or agent_pk in self._new_agents:
                value = 0
            else:
                field = "session_index" if agent_pk is None else "agent_index"
                calls = Call.objects.filter(session_id=session_pk)
                if agent_pk is not None:
                    calls = calls.filter(agent_id=agent_pk)
                value = (calls.aggregate(top=Max(field))["top"] or -1) + 1
        self._indexes[counter_key] = value + 1
        return value

    def _fetch_agents(self, pairs: set[tuple[int, str]]) -> int:
        by_session: dict[int, list[str]] = {}
        for session_pk, agent_id in pairs:
            by_session.setdefault(session_pk, []).append(agent_id[:200])
        found = 0
        for session_pk, names in by_session.items():
            for pk, name in Agent.objects.filter(
                session_id=session_pk, external_id__in=names
            ).values_list("id", "external_id"):
                if (session_pk, name) not in self._agents:
                    found += 1
                self._agents[(session_pk, name)] = pk
        return found

    # --- flushing ---------------------------------------------------------------------

    def flush(self) -> None:
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
        if calls:
            rows = []
            texts = {}
            late = set()  # calls the parser emitted before: they merge with the stored row
            agents = self._agents
            workspace_pk = self.workspace.pk
            self._prime_indexes(
                {(s, agents[(s, record.agent_id)]) for (s, _), record in calls.items()}
            )
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
                        _storable(
                            "\n".join(_touch_line(mode, path) for mode, path in record.touches)
                        )
                        if record.touches
                        else "",
                        record.line or None,
                        record.source_file_id,
                    )
                )
                texts[(session_pk, key)] = record.text
                if record.reemitted:
                    late.add((session_pk, key))
            for session_pk, _key in late:
                self._loaded_skipped.add(session_pk)  # its rows change: derive from the database
                self._loaded_rows.pop(session_pk, None)
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
            added = {key for key, _ in inserted}
            replaced = {key: old for key, _, old in updated}
            summary = self.summary
            summary.duplicates_dropped += len(rows) - len(added)  # calls stored before
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
        if compactions:
            self._upsert_compactions(compactions)

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
        if sessions <= self._new_sessions:  # only this loader has written to these sessions
            existing = self._compaction_keys & set(objects)
        else:
            existing = set(
                Compaction.objects.filter(
                    session_id__in=sessions, key__in=[k for _, k in objects]
                ).values_list("session_id", "key")
            )
        self._compaction_keys |= set(objects)
        with transaction.atomic():
            Compaction.objects.bulk_create(
                list(objects.values()),
                update_conflicts=True,
                unique_fields=["session", "key"],
                update_fields=[
                    "agent", "kind", "timestamp", "trigger", "pre_tokens", "post_tokens", "summary_tokens",
                    "summary_estimated", "duration_ms", "source_line",
                ],
            )  # fmt: skip
        self.summary.compactions += len(set(objects) - existing)
        self.touched_sessions |= sessions


KEY_LENGTH = 300  # Call.key and Compaction.key
_TEXT_FIELDS = {
    CallRecord: ("session_id", "agent_id", "key", "model"),
    CompactionRecord: ("session_id", "agent_id", "key"),
    SessionInfo: ("external_id", "project", "git_branch", "harness_version", "title"),
    AgentInfo: ("session_id", "agent_id", "parent_agent_id", "agent_type", "description",
                "spawn_tool_call_id"),
}  # fmt: skip


# Identifiers longer than their column: (field, column length).
_ID_LENGTHS = (
    ("key", KEY_LENGTH),
    ("session_id", SESSION_ID_LENGTH),
    ("external_id", SESSION_ID_LENGTH),
    ("agent_id", SESSION_ID_LENGTH),  # Agent.external_id
    ("parent_agent_id", SESSION_ID_LENGTH),
)


def _fit_for_columns(record) -> None:
    """Make a record's strings storable: PostgreSQL text cannot hold NUL (it becomes
    U+FFFD), and an identifier longer than its column keeps a prefix and a digest of the
    whole, so that two long identifiers sharing a prefix stay two."""
    fields = _TEXT_FIELDS.get(type(record), ())
    for name in fields:
        value = getattr(record, name)
        if value and "\x00" in value:
            setattr(record, name, value.replace("\x00", "\ufffd"))
    for name, length in _ID_LENGTHS:
        value = getattr(record, name, None) if name in fields else None
        if value is not None and len(value) > length:
            setattr(record, name, _shortened(value, length))


def _needs_fitting(call: CallRecord) -> bool:
    """The common case, inlined: a call whose strings are all storable as they are."""
    return (
        len(call.key) > KEY_LENGTH
        or len(call.session_id) > SESSION_ID_LENGTH
        or len(call.agent_id) > SESSION_ID_LENGTH
        or "\x00" in call.key
        or "\x00" in call.session_id
        or "\x00" in call.agent_id
        or "\x00" in call.model
    )


def _shortened(value: str, length: int) -> str:
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{value[: length - len(digest) - 1]}#{digest}"


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


def _get_or_create(model, defaults=None, **lookup):
    """get_or_create that survives a concurrent insert of the same natural key."""
    try:
        with transaction.atomic():
            return model.objects.get_or_create(defaults=defaults or {}, **lookup)
    except IntegrityError:
        return model.objects.get(**lookup), False


def _merge_info(previous: SessionInfo | None, new: SessionInfo) -> SessionInfo:
    if previous is None:
        return new
    for name in ("project", "git_branch", "harness_version", "title"):
        if getattr(new, name):
            setattr(previous, name, getattr(new, name))
    return previous


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


def decompress_text(data: bytes | memoryview) -> dict:
    return orjson.loads(zstandard.ZstdDecompressor().decompress(bytes(data)))
