"""Streaming parser for Claude Code session transcripts (JSONL). No Django.

Handles the main session file, `subagents/agent-<id>.jsonl` files (with their
`.meta.json` sidecar passed in as `meta`), inline `isSidechain` lines of 1.0.x, and
`compact_boundary` / `microcompact_boundary` records with the `isCompactSummary` message.

Deduplication follows TRACE_FORMATS.md: lines are grouped by (session, message.id,
requestId) — message.id alone when requestId is missing; within a group a main-thread
line beats a sidechain line, then the highest `output_tokens` wins, the last on a tie.
Content blocks of all lines of a group are merged, since Claude Code writes one line per
streamed content block.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

import orjson

from traces.formats.records import (
    AgentInfo,
    CallRecord,
    CompactionRecord,
    ParseError,
    ParseStats,
    SessionInfo,
    estimate_tokens,
)
from traces.formats.tools import signature_and_touches

HARNESS = "claude-code"
KNOWN_TYPES = {
    "user", "assistant", "system", "summary", "queue-operation", "attachment", "progress",
    "ai-title", "file-history-snapshot", "custom-title", "last-prompt", "agent-setting",
    "pr-link", "content-replacement", "mode",
}  # fmt: skip
USAGE_FIELDS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)
SPAWN_TOOLS = {"Task", "Agent"}
MAX_RESULT_CHARS = 100_000
FLUSH_WINDOW = 64  # pending calls kept before the oldest ready ones are emitted
WAIT_WINDOW_LINES = 20_000  # how long an untouched call may wait for its tool results
RECENT_KEYS = 200_000
STATE_ITEMS = 200  # most entries of each kind a resume state keeps
STATE_CHAIN = 2_000  # most sidechain line ids a resume state keeps
_AGENT_FILE = re.compile(r"agent-([A-Za-z0-9_.-]+?)\.jsonl$")


def agent_id_from_path(path: str) -> str | None:
    """'…/subagents/agent-abc.jsonl' -> 'abc'."""
    match = _AGENT_FILE.search(path.replace("\\", "/").rsplit("/", 1)[-1])
    return match.group(1) if match else None


def parse_timestamp(value) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)  # takes a trailing "Z" since Python 3.11
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _Pending:
    __slots__ = (
        "block_keys",
        "blocks",
        "last_line",
        "open_tools",
        "record",
        "sidechain",
        "thread",
    )

    def __init__(self, record: CallRecord, sidechain: bool, line: int, thread: tuple[str, str]):
        self.record = record
        self.sidechain = sidechain
        self.thread = (
            thread  # (session, agent): the call stays open while it is the thread's latest
        )
        self.blocks: list[dict] = []
        self.block_keys: set = set()
        self.last_line = line
        self.open_tools: set[str] = set()


class ClaudeCodeParser:
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

    # --- assistant lines ------------------------------------------------------

    def _assistant(self, entry: dict, line: int, session_id: str, agent_id: str) -> None:
        message = entry.get("message")
        if type(message) is not dict:
            self._error(line, "assistant record without a 'message' object")
            return
        usage = message.get("usage")
        if type(usage) is not dict:
            self.stats.ignored_lines += 1
            return
        self.stats.usage_lines += 1
        get = usage.get
        uncached = get("input_tokens", 0)
        cache_creation = get("cache_creation_input_tokens", 0)
        cache_read = get("cache_read_input_tokens", 0)
        output = get("output_tokens", 0)
        if not (
            type(uncached) is int
            and type(cache_creation) is int
            and type(cache_read) is int
            and type(output) is int
            and uncached >= 0
            and cache_creation >= 0
            and cache_read >= 0
            and output >= 0
        ):
            counts = self._usage_counts(usage, line)  # nulls count as 0; anything else is an error
            if counts is None:
                return
            uncached, cache_creation, cache_read, output = counts
        breakdown = usage.get("cache_creation")
        hour_writes = 0
        if type(breakdown) is dict:
            five = breakdown.get("ephemeral_5m_input_tokens")
            hour = breakdown.get("ephemeral_1h_input_tokens")
            if type(five) is int and type(hour) is int and five >= 0 and hour >= 0 and five + hour:
                # The breakdown is the billed split (ccusage counts it the same way).
                cache_creation = five + hour
                hour_writes = hour
        model = message.get("model") or ""
        if model == "<synthetic>":
            self.stats.ignored_lines += 1  # a locally generated error, not an API call
            return
        sidechain = agent_id != "main" or bool(entry.get("isSidechain"))
        key = self._key_for(message, entry, sidechain, line, session_id)
        slot = (session_id, key)
        context = uncached + cache_creation + cache_read
        pending = self._pending.get(slot)
        if pending is None:
            raw_time = entry.get("timestamp")
            timestamp = parse_timestamp(raw_time)
            if timestamp is None:
                self._error(line, f"field 'timestamp' is missing or not ISO-8601: {raw_time!r}")
                return
            record = CallRecord(
                HARNESS, session_id, agent_id, key, timestamp, str(model), uncached, cache_creation,
                cache_read, output, 0, context, line, sidechain,
            )  # fmt: skip
            record.cache_creation_1h_tokens = hour_writes
            if hash(slot) in self._emitted:
                # A late line of a call already emitted: the loader merges it with the stored
                # call by the same rule, and counts it as a duplicate.
                record.reemitted = True
            pending = _Pending(record, sidechain, line, (session_id, agent_id))
            prompt = self._prompts.pop(agent_id, None) if self._prompts else None
            if prompt:
                record.text["prompt"] = prompt
            summary = self._summaries.pop(agent_id, None) if self._summaries else None
            if summary:
                # The summary is what the model continued from: a reader needs to see it.
                record.text["summary"] = summary
            self._pending[slot] = pending
        else:
            self.stats.duplicates_dropped += 1
            self._pending.move_to_end(slot)
            pending.last_line = line
            record = pending.record
            if (pending.sidechain and not sidechain) or (
                pending.sidechain == sidechain and output >= record.output_tokens
            ):
                record.model = str(model) or record.model
                record.input_tokens = uncached
                record.cache_creation_tokens = cache_creation
                record.cache_creation_1h_tokens = hour_writes
                record.cache_read_tokens = cache_read
                record.output_tokens = output
                record.context_tokens = context
                record.is_sidechain = sidechain
                pending.sidechain = sidechain
        thread = (session_id, agent_id)
        previous = self._latest.get(thread)
        if previous != slot:
            self._latest[thread] = slot
            if previous is not None:
                other = self._pending.get(previous)
                if other is not None and not other.open_tools:
                    self._ready[previous] = None
        self._ready.pop(slot, None)
        content = message.get("content")
        if content:
            self._merge_blocks(pending, content, slot, agent_id)

    def _usage_counts(self, usage: dict, line: int) -> list[int] | None:
        counts = []
        for name in USAGE_FIELDS:
            value = usage.get(name, 0)
            if value is None:
                value = 0
            elif type(value) is not int or value < 0:
                self._error(
                    line,
                    f"field 'message.usage.{name}' must be a non-negative integer, got {value!r}",
                )
                return None
            counts.append(value)
        return counts

    def _key_for(
        self, message: dict, entry: dict, sidechain: bool, line: int, session_id: str
    ) -> str:
        message_id = message.get("id")
        if type(message_id) is not str or not message_id:
            # Its own call. A line number alone is not unique in a session: its subagent
            # files number their lines too.
            uuid = entry.get("uuid")
            if type(uuid) is str and uuid:
                return f"uuid:{uuid}"
            return f"line:{self.file_agent_id or 'main'}:{line}"
        request_id = entry.get("requestId")
        key = f"{message_id}:{request_id}" if type(request_id) is str and request_id else message_id
        known = self._msgid_to_key.get((session_id, message_id))
        if known is None:
            self._msgid_to_key[(session_id, message_id)] = key
            if len(self._msgid_to_key) > RECENT_KEYS:
                self._msgid_to_key.pop(next(iter(self._msgid_to_key)))
        elif known != key:
            other = self._pending.get((session_id, known))
            # /btw side questions replay a message under another requestId: same call.
            if sidechain or (other is not None and other.sidechain):
                return known
            self._msgid_to_key[(session_id, message_id)] = key
        return key

    def _merge_blocks(
        self, pending: _Pending, content, slot: tuple[str, str], agent_id: str
    ) -> None:
        if type(content) is str:
            content = [{"type": "text", "text": content}]
        elif type(content) is not list:
            return
        blocks = pending.blocks
        seen = pending.block_keys  # a block repeated by a copied line is kept once
        for block in content:
            if type(block) is not dict:
                continue
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if type(text) is str and len(block) == 2:
                    copy = block  # Claude Code's text blocks hold just these keys: kept as is
                else:
                    text = text if type(text) is str else str(text or "")
                    copy = {"type": "text", "text": text}
                if text not in seen:
                    seen.add(text)
                    blocks.append(copy)
            elif kind == "tool_use":
                tool_id = str(block.get("id") or "")
                marker = ("tool_use", tool_id or len(blocks))
                if marker in seen:
                    continue
                seen.add(marker)
                name = str(block.get("name") or "")
                tool_input = block.get("input")
                blocks.append(
                    {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
                )
                token, touches = signature_and_touches(name, tool_input)
                pending.record.signature.append(token)
                if touches:
                    pending.record.touches.extend(touches)
                if tool_id:
                    pending.open_tools.add(tool_id)
                    self._tool_owner[tool_id] = slot
                if name in SPAWN_TOOLS and agent_id == "main" and type(tool_input) is dict:
                    prompt = tool_input.get("prompt")
                    if type(prompt) is str and prompt.strip():
                        self._spawn_prompts[prompt.strip()] = (
                            tool_id,
                            str(tool_input.get("description") or ""),
                            str(tool_input.get("subagent_type") or ""),
                        )
            elif kind == "thinking":
                text = str(block.get("thinking") or "")
                if ("thinking", text) not in seen:
                    seen.add(("thinking", text))
                    blocks.append({"type": "thinking", "text": text})

    # --- user and system lines ------------------------------------------------

    def _user(self, entry: dict, line: int, session_id: str, agent_id: str) -> None:
        message = entry.get("message")
        content = message.get("content") if type(message) is dict else None
        if entry.get("isCompactSummary"):
            text = content if type(content) is str else _text_of(content)
            self._compact_summary(entry, line, text, session_id, agent_id)
            return
        self.stats.ignored_lines += 1
        prompt = ""
        if type(content) is list:
            texts = []
            for block in content:
                if type(block) is dict:
                    kind = block.get("type")
                    if kind == "tool_result":
                        self._attach_result(block)
                    elif kind == "text":
                        texts.append(block)
            if texts:
                prompt = _text_of(texts)
        elif type(content) is str:
            prompt = content
        if prompt and not entry.get("isMeta"):
            self._prompts[agent_id] = prompt[:MAX_RESULT_CHARS]

    def _attach_result(self, block: dict) -> None:
        tool_id = block.get("tool_use_id")
        slot = self._tool_owner.pop(tool_id, None) if type(tool_id) is str else None
        pending = self._pending.get(slot) if slot else None
        if pending is None:
            return
        raw = block.get("content")
        text = raw if type(raw) is str else _text_of(raw)
        results = pending.record.text.get("results")
        if results is None:
            results = pending.record.text["results"] = {}
        results[tool_id] = {
            "content": text[:MAX_RESULT_CHARS] if len(text) > MAX_RESULT_CHARS else text,
            "is_error": bool(block.get("is_error")),
            "truncated_chars": max(0, len(text) - MAX_RESULT_CHARS),
        }
        pending.open_tools.discard(tool_id)
        if not pending.open_tools and self._latest.get(pending.thread) != slot:
            self._ready[slot] = None

    def _system(self, entry: dict, line: int, session_id: str, agent_id: str) -> None:
        subtype = entry.get("subtype")
        if subtype != "compact_boundary" and subtype != "microcompact_boundary":
            self.stats.ignored_lines += 1
            return
        if self._open_compaction is not None:
            self._out.append(self._open_compaction)
        micro = subtype == "microcompact_boundary"
        meta = entry.get("microcompactMetadata" if micro else "compactMetadata")
        if type(meta) is not dict:
            meta = (
                entry.get("compact_metadata") if type(entry.get("compact_metadata")) is dict else {}
            )
        trigger = meta.get("trigger")
        self.stats.compactions += 1
        self._open_compaction = CompactionRecord(
            harness=HARNESS,
            session_id=session_id,
            agent_id=agent_id,
            key=f"boundary:{entry.get('uuid') or line}",
            timestamp=parse_timestamp(entry.get("timestamp")),
            trigger=trigger if trigger in {"auto", "manual"} else "unknown",
            line=line,
            kind="micro" if micro else "full",
            pre_tokens=_int_or_none(meta.get("preTokens", meta.get("pre_tokens"))),
            post_tokens=_int_or_none(meta.get("postTokens", meta.get("post_tokens"))),
            duration_ms=_int_or_none(meta.get("durationMs")),
        )

    def _compact_summary(
        self, entry: dict, line: int, text: str, session_id: str, agent_id: str
    ) -> None:
        compaction = self._open_compaction
        if compaction is None:
            # Old builds wrote only the summary message: the boundary is implied.
            self.stats.compactions += 1
            compaction = CompactionRecord(
                harness=HARNESS,
                session_id=session_id,
                agent_id=agent_id,
                key=f"summary:{entry.get('uuid') or line}",
                timestamp=parse_timestamp(entry.get("timestamp")),
                trigger="unknown",
                line=line,
            )
        if text and compaction.summary_tokens is None:
            compaction.summary_tokens = estimate_tokens(text)
            compaction.summary_estimated = True
        if text:
            self._summaries[agent_id] = text[:MAX_RESULT_CHARS]
        self._open_compaction = None
        self._out.append(compaction)

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


def _compaction_state(record: CompactionRecord) -> dict:
    state = {name: getattr(record, name) for name in CompactionRecord.__slots__}
    state["timestamp"] = record.timestamp.isoformat() if record.timestamp else None
    return state


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict):
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "image":
                parts.append("[image]")
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)


def _int_or_none(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
