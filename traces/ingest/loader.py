"""`TraceLoader`: records fed from parsed files, their sessions and agents looked up or
created in bulk, batches flushed (see `writes`), and the sessions it created derived
from the rows it wrote."""

from __future__ import annotations

import zstandard
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

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
from traces.ingest.rules import (
    IngestSummary,
    _fit_for_columns,
    _merge_info,
    _needs_fitting,
)
from traces.ingest.writes import (
    TEXT_COMPRESSOR_LEVEL,
    BatchWriter,
    _apply_session_info,
    _get_or_create,
    _insert_missing,
)
from traces.models import Agent, AgentKind, Call, IngestedFile, Session

BATCH_SIZE = 5000
# A loader derives the sessions it created itself while their call rows fit in this many
# rows of memory; beyond it, the derive step reads them back from the database instead.
LOADED_DERIVE_MAX_CALLS = 100_000
LINK_CHUNK = 1000  # ids per statement when stamping and linking sessions


class TraceLoader(BatchWriter):
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
        self.file_sessions: set[tuple[int, int]] = set()  # (IngestedFile, session) pairs
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
        self._stamped: set[int] = set()  # sessions whose last_ingested_at this loader set

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
        self._record_ingested()
        loaded = {pk: rows for pk, rows in self._loaded_rows.items() if pk in self._new_sessions}
        self._loaded_rows, self._loaded_last, self._loaded_skipped = {}, {}, set()
        if loaded:
            from traces.derive import sessions_derive_loaded

            with transaction.atomic():
                sessions_derive_loaded(workspace_id=self.workspace.pk, calls=loaded)
            self.summary.derived_sessions |= set(loaded)
        if self.touched_sessions:
            # Telemetry may have reported these calls' costs before they arrived.
            from traces.services.call_costs import calls_telemetry_cost_apply

            calls_telemetry_cost_apply(session_ids=self.touched_sessions)
        return self.touched_sessions - set(loaded)

    def _record_ingested(self) -> None:
        """Stamp the sessions this load touched with the time, and link each file read to
        the sessions it held calls of (the job page and the sessions filter read these)."""
        now = timezone.now()
        touched = sorted(self.touched_sessions - self._stamped)
        for start in range(0, len(touched), LINK_CHUNK):
            chunk = touched[start : start + LINK_CHUNK]
            with transaction.atomic():
                # Locked in id order first, as the derive step locks them: no deadlock
                # with another worker deriving the same sessions.
                locked = (
                    Session.objects.filter(pk__in=chunk)
                    .order_by("pk")
                    .select_for_update(no_key=True)
                )
                Session.objects.filter(pk__in=list(locked.values_list("pk", flat=True))).update(
                    last_ingested_at=now
                )
        self._stamped |= set(touched)
        if self.file_sessions:
            Link = IngestedFile.sessions.through
            Link.objects.bulk_create(
                [Link(ingestedfile_id=f, session_id=s) for f, s in sorted(self.file_sessions)],
                batch_size=LINK_CHUNK,
                ignore_conflicts=True,
            )
            self.file_sessions = set()

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
        missing = self._missing_agents(wanted)
        for parents_first in (True, False):
            level = {pair for pair in missing if (pair[1] == "main") == parents_first}
            if level:
                self._ensure_level(level)

    def _missing_agents(self, wanted: set[tuple[int, str]]) -> set[tuple[int, str]]:
        """The wanted agents not known yet, with the parent (or main agent) of each subagent."""
        missing = {pair for pair in wanted if pair not in self._agents}
        for session_pk, agent_id in list(missing):
            info = self._pending_agents.get((session_pk, agent_id))
            if agent_id != "main":
                missing.add((session_pk, (info.parent_agent_id if info else None) or "main"))
        return missing - set(self._agents)

    def _ensure_level(self, level: set[tuple[int, str]]) -> None:
        """Fetch or create one level of agents (main agents, or subagents)."""
        # Agents of sessions this loader created cannot exist yet: no need to look.
        self._fetch_agents({pair for pair in level if pair[0] not in self._new_sessions})
        to_create = [self._agent_object(pair) for pair in level - set(self._agents)]
        fresh = [a for a in to_create if a.session_id in self._new_sessions]
        known = [a for a in to_create if a.session_id not in self._new_sessions]
        if fresh:
            known += self._create_fresh_agents(fresh)
        if known:
            with transaction.atomic():
                created = _insert_missing(Agent, known)
            found = self._fetch_agents({(a.session_id, a.external_id) for a in known})
            # Another worker may have created some of them meanwhile: count ours only.
            self.summary.agents += found if created is None else created

    def _create_fresh_agents(self, fresh: list[Agent]) -> list[Agent]:
        """Bulk-create the agents of sessions this loader created; if another worker reached
        these sessions too, return them to be merged like known ones (else nothing)."""
        try:
            with transaction.atomic():
                Agent.objects.bulk_create(fresh)  # ids come back (RETURNING)
        except IntegrityError:  # another worker reached these sessions too
            self._new_sessions -= {a.session_id for a in fresh}
            for agent in fresh:
                agent.pk = None
            return fresh
        for agent in fresh:
            self._agents[(agent.session_id, agent.external_id)] = agent.pk
            self._new_agents.add(agent.pk)
        self.summary.agents += len(fresh)
        return []

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
