"""The Claude Code transcript parser: state, resuming, dispatching lines, agents, flushing.
No Django."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator

import orjson

from traces.formats.claude_code.assistant import AssistantLines
from traces.formats.claude_code.common import (
    FLUSH_WINDOW,
    HARNESS,
    KNOWN_TYPES,
    RECENT_KEYS,
    STATE_CHAIN,
    STATE_ITEMS,
    WAIT_WINDOW_LINES,
    _compaction_state,
    _Pending,
    agent_id_from_path,
    parse_timestamp,
)
from traces.formats.claude_code.user_system import UserSystemLines
from traces.formats.records import (
    AgentInfo,
    CallRecord,
    CompactionRecord,
    ParseError,
    ParseStats,
    SessionInfo,
)


class ClaudeCodeParser(AssistantLines, UserSystemLines):
    """Parse one Claude Code transcript file. Iterate `parse(lines)` for records.

    Handlers append records to `self._out` instead of yielding: a generator per line
    costs more than the rest of the per-line work on large transcripts.
    """

    def __init__(self, path: str = "", meta: dict | None = None, state: dict | None = None):
        self.path = path
        self.stats = ParseStats()
        self.file_agent_id = agent_id_from_path(path)
        self.meta = meta or {}
        self._out: list = []
        self._sessions_seen: set[str] = set()
        self._agents_seen: set[tuple[str, str]] = set()
        # Calls are tracked by (session id, key): the dedup key is per session, and a file
        # can hold several sessions' lines. Pending calls are ordered by their last line.
        self._pending: OrderedDict[tuple[str, str], _Pending] = OrderedDict()
        # A call may be emitted once another call of its thread has started and no tool
        # result is awaited; until then more of its streamed blocks may follow.
        self._ready: dict[tuple[str, str], None] = {}
        self._latest: dict[tuple[str, str], tuple[str, str]] = {}  # thread -> its newest call
        self._emitted: dict[int, None] = {}  # hashes of recently emitted calls
        self._msgid_to_key: dict[tuple[str, str], str] = {}
        self._tool_owner: dict[str, tuple[str, str]] = {}  # tool_use id -> pending call
        self._sidechain_agent: dict[str, str] = {}  # uuid -> agent id (sidechain lines only)
        self._side_agents = 0
        self._side_spawns: dict[str, tuple[str, str, str]] = {}  # unnamed agent -> its spawn
        self._spawn_prompts: dict[str, tuple[str, str, str]] = {}  # prompt -> (tool id, desc, type)
        self._prompts: dict[str, str] = {}  # agent id -> last user prompt text
        self._summaries: dict[str, str] = {}  # agent id -> compaction summary not yet shown
        self._open_compaction: CompactionRecord | None = None
        self._last_session = ""
        self._pending_title = ""  # a summary line before any session id
        self.first_line = 1
        self._unfinished_compaction: CompactionRecord | None = None
        if state:
            self._restore(state)

    # --- public ---------------------------------------------------------------

    def state(self, *, lines: int) -> dict:
        """What a parser needs to go on reading this file after its first `lines` lines,
        when it grows (call after `parse` is exhausted). Plain JSON, bounded in size."""
        compaction = self._unfinished_compaction
        return {
            "lines": lines,
            "last_session": self._last_session,
            "pending_title": self._pending_title,
            "sessions": sorted(self._sessions_seen)[-STATE_ITEMS:],
            "agents": sorted(self._agents_seen)[-STATE_ITEMS:],
            "chain": list(self._sidechain_agent.items())[-STATE_CHAIN:],
            "side_agents": self._side_agents,
            "side_spawns": list(self._side_spawns.items())[-STATE_ITEMS:],
            "spawn_prompts": list(self._spawn_prompts.items())[-STATE_ITEMS:],
            "prompts": list(self._prompts.items())[-STATE_ITEMS:],
            "summaries": list(self._summaries.items())[-STATE_ITEMS:],
            "msgid_to_key": [[s, m, k] for (s, m), k in self._msgid_to_key.items()][-STATE_CHAIN:],
            "compaction": _compaction_state(compaction) if compaction else None,
        }

    def _restore(self, state: dict) -> None:
        self.first_line = int(state.get("lines") or 0) + 1
        self._last_session = str(state.get("last_session") or "")
        self._pending_title = str(state.get("pending_title") or "")
        self._sessions_seen = set(state.get("sessions") or ())
        self._agents_seen = {tuple(pair) for pair in state.get("agents") or ()}
        self._sidechain_agent = dict(state.get("chain") or ())
        self._side_agents = int(state.get("side_agents") or 0)
        self._side_spawns = {k: tuple(v) for k, v in state.get("side_spawns") or ()}
        self._spawn_prompts = {k: tuple(v) for k, v in state.get("spawn_prompts") or ()}
        self._prompts = dict(state.get("prompts") or ())
        self._summaries = dict(state.get("summaries") or ())
        self._msgid_to_key = {(s, m): k for s, m, k in state.get("msgid_to_key") or ()}
        compaction = state.get("compaction")
        if compaction:
            # Its summary may be among the new lines: it is emitted again with them.
            self._open_compaction = CompactionRecord(
                **{**compaction, "timestamp": parse_timestamp(compaction.get("timestamp"))}
            )

    def parse(self, lines: Iterable[bytes]) -> Iterator:
        out = self._out
        stats = self.stats
        loads = orjson.loads
        pending = self._pending
        for number, raw in enumerate(lines, start=self.first_line):
            stats.lines += 1
            try:
                entry = loads(raw)
            except orjson.JSONDecodeError as exc:
                if not raw.strip():
                    stats.ignored_lines += 1
                    continue
                stats.malformed_lines += 1
                yield ParseError(number, f"malformed JSON: {exc}")
                continue
            if type(entry) is not dict:
                stats.malformed_lines += 1
                yield ParseError(number, f"expected a JSON object, got {type(entry).__name__}")
                continue
            self._entry(entry, number)
            if len(pending) > FLUSH_WINDOW:
                self._flush(number)
            if out:
                yield from out
                out.clear()
        self._flush_all()
        yield from out
        out.clear()

    # --- dispatch ---------------------------------------------------------------

    def _error(self, line: int | None, message: str, *, malformed: bool = True) -> None:
        if malformed:
            self.stats.malformed_lines += 1
        else:
            self.stats.ignored_lines += 1
        self._out.append(ParseError(line, message))

    def _entry(self, entry: dict, line: int) -> None:
        kind = entry.get("type")
        session_id = entry.get("sessionId")
        if (
            (kind == "assistant" or kind == "user")
            and session_id
            and session_id == self._last_session
        ):
            # Most lines: a message of the session of the line before (checked in full below).
            self._message(kind, entry, line, session_id)
            return
        if kind is None:
            message = entry.get("message")
            if type(message) is dict and type(message.get("usage")) is dict:
                kind = "assistant"  # some exporters (and ccusage fixtures) omit the type
        if type(kind) is not str:
            self._error(line, f"field 'type' must be a string, got {type(kind).__name__}")
            return
        if kind not in KNOWN_TYPES:
            self._error(line, f"unknown record type {kind!r} (skipped)", malformed=False)
            return
        if session_id is not None and type(session_id) is not str:
            self._error(line, "field 'sessionId' must be a string")
            return
        if session_id:
            if session_id != self._last_session:
                self._last_session = session_id
                if session_id not in self._sessions_seen:
                    self._sessions_seen.add(session_id)
                    self._out.append(
                        SessionInfo(
                            harness=HARNESS,
                            external_id=session_id,
                            project=str(entry.get("cwd") or ""),
                            git_branch=str(entry.get("gitBranch") or ""),
                            harness_version=str(entry.get("version") or ""),
                            title=self._pending_title,
                        )
                    )
                    self._pending_title = ""
        else:
            session_id = self._last_session
        if kind == "assistant" or kind == "user" or kind == "system":
            if not session_id:
                self._error(line, f"{kind} record without 'sessionId'")
                return
            self._message(kind, entry, line, session_id)
        elif kind in {"summary", "ai-title", "custom-title"}:
            title = str(
                entry.get("summary") or entry.get("title") or entry.get("customTitle") or ""
            )[:500]
            if title and session_id:
                self._out.append(SessionInfo(HARNESS, session_id, title=title))
            elif title:
                self._pending_title = title
            self.stats.ignored_lines += 1
        else:
            self.stats.ignored_lines += 1

    def _message(self, kind: str, entry: dict, line: int, session_id: str) -> None:
        """An assistant, user or system line, handed on with its agent."""
        if self.file_agent_id is None and not entry.get("isSidechain"):
            agent_id = "main"
        else:
            agent_id = self._agent_for(entry, session_id)
        if kind == "assistant":
            self._assistant(entry, line, session_id, agent_id)
        elif kind == "user":
            self._user(entry, line, session_id, agent_id)
        else:
            self._system(entry, line, session_id, agent_id)

    # --- agents ---------------------------------------------------------------

    def _agent_for(self, entry: dict, session_id: str) -> str:
        """The line's agent id; announces an AgentInfo the first time an agent is seen."""
        if not entry.get("isSidechain") and self.file_agent_id is None:
            return "main"
        if self.file_agent_id:
            agent_id = self.file_agent_id
            if (session_id, agent_id) not in self._agents_seen:
                self._agents_seen.add((session_id, agent_id))
                self._out.append(
                    AgentInfo(
                        harness=HARNESS,
                        session_id=session_id,
                        agent_id=agent_id,
                        kind="compaction" if agent_id.startswith("acompact") else "subagent",
                        parent_agent_id="main",
                        agent_type=str(self.meta.get("agentType") or ""),
                        description=str(self.meta.get("description") or ""),
                        spawn_tool_call_id=str(self.meta.get("toolUseId") or ""),
                        start_kind="unknown",
                    )
                )
            return agent_id
        uuid = entry.get("uuid")
        named = entry.get("agentId")
        chain = self._sidechain_agent
        if type(named) is str and named:
            agent_id = named
            if (session_id, agent_id) not in self._agents_seen:
                self._agents_seen.add((session_id, agent_id))
                spawn = self._spawn_for(entry)
                if not spawn[0]:
                    # A chain whose first lines named no agent: the spawn found there is this agent's.
                    parent = entry.get("parentUuid")
                    spawn = self._side_spawns.pop(chain.get(parent, ""), spawn)
                self._out.append(
                    AgentInfo(
                        HARNESS,
                        session_id,
                        agent_id,
                        spawn_tool_call_id=spawn[0],
                        description=spawn[1],
                        agent_type=spawn[2],
                        start_kind="unknown",
                    )
                )
        else:
            # Lines without an agentId (tool results, often) belong to their parent's agent.
            parent = entry.get("parentUuid")
            agent_id = chain.get(parent) if type(parent) is str else None
            if agent_id is None:
                self._side_agents += 1
                agent_id = f"side-{uuid if type(uuid) is str and uuid else self._side_agents}"
                spawn = self._spawn_for(entry)
                if spawn[0]:
                    self._side_spawns[agent_id] = spawn
                self._agents_seen.add((session_id, agent_id))
                self._out.append(
                    AgentInfo(
                        harness=HARNESS,
                        session_id=session_id,
                        agent_id=agent_id,
                        spawn_tool_call_id=spawn[0],
                        description=spawn[1],
                        agent_type=spawn[2],
                        start_kind="fresh" if spawn[0] else "unknown",
                    )
                )
        if type(uuid) is str and uuid:
            chain[uuid] = agent_id
            if len(chain) > RECENT_KEYS:
                del chain[next(iter(chain))]
        return agent_id

    def _spawn_for(self, entry: dict) -> tuple[str, str, str]:
        if not self._spawn_prompts:
            return "", "", ""
        message = entry.get("message")
        content = message.get("content") if type(message) is dict else None
        if type(content) is list:
            content = " ".join(
                b.get("text", "") for b in content if type(b) is dict and b.get("type") == "text"
            )
        if type(content) is str:
            return self._spawn_prompts.pop(content.strip(), ("", "", ""))
        return "", "", ""

    # --- flushing -----------------------------------------------------------------

    def _flush(self, line: int) -> None:
        """Emit calls down to the window: first one untouched for WAIT_WINDOW_LINES lines,
        whatever it waits for, then the ready ones, oldest first."""
        pending = self._pending
        ready = self._ready
        while len(pending) > FLUSH_WINDOW:
            slot = next(iter(pending))  # the least recently touched
            if line - pending[slot].last_line < WAIT_WINDOW_LINES:
                if not ready:
                    return
                slot = next(iter(ready))
            self._out.append(self._emit(slot))

    def _flush_all(self) -> None:
        for key in list(self._pending):
            self._out.append(self._emit(key))
        self._unfinished_compaction = self._open_compaction
        if self._open_compaction is not None:
            self._out.append(self._open_compaction)
            self._open_compaction = None

    def _emit(self, slot: tuple[str, str]) -> CallRecord:
        pending = self._pending.pop(slot)
        self._ready.pop(slot, None)
        if self._latest.get(pending.thread) == slot:
            del self._latest[pending.thread]
        emitted = self._emitted
        emitted[hash(slot)] = None
        if len(emitted) > RECENT_KEYS:
            del emitted[next(iter(emitted))]
        for tool_id in pending.open_tools:
            self._tool_owner.pop(tool_id, None)
        record = pending.record
        record.text["blocks"] = pending.blocks
        self.stats.calls += 1
        return record
