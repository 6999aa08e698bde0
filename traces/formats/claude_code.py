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
FLUSH_WINDOW = 64  # pending calls without open tool uses
WAIT_WINDOW_LINES = 20_000  # how long a call may wait for its tool results
RECENT_KEYS = 200_000
_AGENT_FILE = re.compile(r"agent-([A-Za-z0-9_.-]+?)\.jsonl$")


def agent_id_from_path(path: str) -> str | None:
    """'…/subagents/agent-abc.jsonl' -> 'abc'."""
    match = _AGENT_FILE.search(path.replace("\\", "/").rsplit("/", 1)[-1])
    return match.group(1) if match else None


def parse_timestamp(value) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _Pending:
    __slots__ = (
        "block_keys",
        "blocks",
        "first_line",
        "last_line",
        "open_tools",
        "record",
        "sidechain",
    )

    def __init__(self, record: CallRecord, sidechain: bool, line: int):
        self.record = record
        self.sidechain = sidechain
        self.blocks: list[dict] = []
        self.block_keys: set = set()
        self.first_line = line
        self.last_line = line
        self.open_tools: set[str] = set()


class ClaudeCodeParser:
    """Parse one Claude Code transcript file. Iterate `parse(lines)` for records."""

    def __init__(self, path: str = "", meta: dict | None = None):
        self.path = path
        self.stats = ParseStats()
        self.file_agent_id = agent_id_from_path(path)
        self.meta = meta or {}
        self._sessions_seen: set[str] = set()
        self._agents_seen: set[tuple[str, str]] = set()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._recent_keys: OrderedDict[str, None] = OrderedDict()
        self._msgid_to_key: dict[str, str] = {}
        self._tool_owner: dict[str, str] = {}  # tool_use id -> pending key
        self._sidechain_agent: dict[str, str] = {}  # uuid -> agent id (sidechain lines only)
        self._spawn_prompts: dict[str, tuple[str, str, str]] = {}  # prompt -> (tool id, desc, type)
        self._prompts: dict[str, str] = {}  # agent id -> last user prompt text
        self._open_compaction: CompactionRecord | None = None
        self._last_session = ""
        self._pending_title = ""  # a summary line before any session id

    # --- public ---------------------------------------------------------------

    def parse(self, lines: Iterable[bytes]) -> Iterator:
        for number, raw in enumerate(lines, start=1):
            self.stats.lines += 1
            stripped = raw.strip()
            if not stripped:
                self.stats.ignored_lines += 1
                continue
            try:
                entry = orjson.loads(stripped)
            except orjson.JSONDecodeError as exc:
                self.stats.malformed_lines += 1
                yield ParseError(number, f"malformed JSON: {exc}")
                continue
            if not isinstance(entry, dict):
                self.stats.malformed_lines += 1
                yield ParseError(number, f"expected a JSON object, got {type(entry).__name__}")
                continue
            yield from self._entry(entry, number)
            yield from self._flush(number)
        yield from self._flush_all()

    # --- dispatch ---------------------------------------------------------------

    def _entry(self, entry: dict, line: int) -> Iterator:
        kind = entry.get("type")
        message = entry.get("message")
        has_usage = isinstance(message, dict) and isinstance(message.get("usage"), dict)
        if kind is None and has_usage:
            kind = "assistant"  # some exporters (and ccusage fixtures) omit the type
        if not isinstance(kind, str):
            self.stats.malformed_lines += 1
            yield ParseError(line, f"field 'type' must be a string, got {type(kind).__name__}")
            return
        if kind not in KNOWN_TYPES:
            self.stats.ignored_lines += 1
            yield ParseError(line, f"unknown record type {kind!r} (skipped)")
            return
        session_id = entry.get("sessionId")
        if session_id is not None and not isinstance(session_id, str):
            self.stats.malformed_lines += 1
            yield ParseError(line, "field 'sessionId' must be a string")
            return
        if session_id:
            self._last_session = session_id
            if session_id not in self._sessions_seen:
                self._sessions_seen.add(session_id)
                yield SessionInfo(
                    harness=HARNESS,
                    external_id=session_id,
                    project=str(entry.get("cwd") or ""),
                    git_branch=str(entry.get("gitBranch") or ""),
                    harness_version=str(entry.get("version") or ""),
                    title=self._pending_title,
                )
                self._pending_title = ""
        if kind in {"assistant", "user", "system"}:
            session_id = session_id or self._last_session
            if not session_id:
                self.stats.malformed_lines += 1
                yield ParseError(line, f"{kind} record without 'sessionId'")
                return
            agent_id = "main"
            for item in self._agent_for(entry, session_id):
                if isinstance(item, str):
                    agent_id = item
                else:
                    yield item
            handler = {"assistant": self._assistant, "user": self._user, "system": self._system}[
                kind
            ]
            yield from handler(entry, line, session_id, agent_id)
        elif kind in {"summary", "ai-title", "custom-title"}:
            title = str(
                entry.get("summary") or entry.get("title") or entry.get("customTitle") or ""
            )[:500]
            if title and (session_id or self._last_session):
                yield SessionInfo(HARNESS, session_id or self._last_session, title=title)
            elif title:
                self._pending_title = title
            self.stats.ignored_lines += 1
        else:
            self.stats.ignored_lines += 1

    # --- agents ---------------------------------------------------------------

    def _agent_for(self, entry: dict, session_id: str) -> Iterator[AgentInfo | str]:
        """Yield AgentInfo for a newly seen agent, then the agent id (last item)."""
        sidechain = bool(entry.get("isSidechain"))
        uuid = entry.get("uuid")
        if self.file_agent_id:
            agent_id = self.file_agent_id
            if (session_id, agent_id) not in self._agents_seen:
                self._agents_seen.add((session_id, agent_id))
                is_compaction = agent_id.startswith("acompact")
                yield AgentInfo(
                    harness=HARNESS,
                    session_id=session_id,
                    agent_id=agent_id,
                    kind="compaction" if is_compaction else "subagent",
                    parent_agent_id="main",
                    agent_type=str(self.meta.get("agentType") or ""),
                    description=str(self.meta.get("description") or ""),
                    spawn_tool_call_id=str(self.meta.get("toolUseId") or ""),
                    start_kind="unknown",
                )
        elif sidechain and isinstance(entry.get("agentId"), str) and entry["agentId"]:
            agent_id = entry["agentId"]
            if (session_id, agent_id) not in self._agents_seen:
                self._agents_seen.add((session_id, agent_id))
                yield AgentInfo(HARNESS, session_id, agent_id)
        elif sidechain:
            parent = entry.get("parentUuid")
            agent_id = self._sidechain_agent.get(parent) if parent else None
            if agent_id is None:
                agent_id = f"side-{uuid or len(self._sidechain_agent)}"
                spawn = self._spawn_for(entry)
                self._agents_seen.add((session_id, agent_id))
                yield AgentInfo(
                    harness=HARNESS,
                    session_id=session_id,
                    agent_id=agent_id,
                    spawn_tool_call_id=spawn[0],
                    description=spawn[1],
                    agent_type=spawn[2],
                    start_kind="fresh" if spawn[0] else "unknown",
                )
        else:
            agent_id = "main"
        if sidechain and uuid and not self.file_agent_id:
            self._sidechain_agent[uuid] = agent_id
        yield agent_id

    def _spawn_for(self, entry: dict) -> tuple[str, str, str]:
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = " ".join(
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
        if isinstance(content, str):
            return self._spawn_prompts.pop(content.strip(), ("", "", ""))
        return "", "", ""

    # --- assistant lines ------------------------------------------------------

    def _assistant(self, entry: dict, line: int, session_id: str, agent_id: str) -> Iterator:
        message = entry.get("message")
        if not isinstance(message, dict):
            self.stats.malformed_lines += 1
            yield ParseError(line, "assistant record without a 'message' object")
            return
        usage = message.get("usage")
        if not isinstance(usage, dict):
            self.stats.ignored_lines += 1
            return
        self.stats.usage_lines += 1
        counts = {}
        for name in USAGE_FIELDS:
            value = usage.get(name, 0)
            if value is None:
                value = 0
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self.stats.malformed_lines += 1
                yield ParseError(
                    line,
                    f"field 'message.usage.{name}' must be a non-negative integer, got {value!r}",
                )
                return
            counts[name] = value
        breakdown = usage.get("cache_creation")
        if isinstance(breakdown, dict):
            parts = [
                breakdown.get("ephemeral_5m_input_tokens"),
                breakdown.get("ephemeral_1h_input_tokens"),
            ]
            if all(isinstance(p, int) for p in parts) and sum(parts) > 0:
                counts["cache_creation_input_tokens"] = sum(parts)
        model = message.get("model") or ""
        if model == "<synthetic>":
            self.stats.ignored_lines += 1  # a locally generated error, not an API call
            return
        timestamp = parse_timestamp(entry.get("timestamp"))
        if timestamp is None:
            self.stats.malformed_lines += 1
            yield ParseError(
                line, f"field 'timestamp' is missing or not ISO-8601: {entry.get('timestamp')!r}"
            )
            return
        sidechain = bool(entry.get("isSidechain")) or agent_id != "main"
        key = self._key_for(message, entry, session_id, sidechain, line)
        context = (
            counts["input_tokens"]
            + counts["cache_creation_input_tokens"]
            + counts["cache_read_input_tokens"]
        )
        pending = self._pending.get(key)
        if pending is None and key in self._recent_keys:
            # A late line for a call already emitted: emit it again; the loader keeps the larger.
            self.stats.duplicates_dropped += 1
        if pending is None:
            record = CallRecord(
                harness=HARNESS,
                session_id=session_id,
                agent_id=agent_id,
                key=key,
                timestamp=timestamp,
                model=str(model),
                input_tokens=counts["input_tokens"],
                cache_creation_tokens=counts["cache_creation_input_tokens"],
                cache_read_tokens=counts["cache_read_input_tokens"],
                output_tokens=counts["output_tokens"],
                reasoning_tokens=0,
                context_tokens=context,
                line=line,
                is_sidechain=sidechain,
            )
            pending = _Pending(record, sidechain, line)
            prompt = self._prompts.pop(agent_id, None)
            if prompt:
                record.text["prompt"] = prompt
            self._pending[key] = pending
        else:
            self.stats.duplicates_dropped += 1
            self._pending.move_to_end(key)
            pending.last_line = line
            record = pending.record
            replace = (pending.sidechain and not sidechain) or (
                pending.sidechain == sidechain and counts["output_tokens"] >= record.output_tokens
            )
            if replace:
                record.model = str(model) or record.model
                record.input_tokens = counts["input_tokens"]
                record.cache_creation_tokens = counts["cache_creation_input_tokens"]
                record.cache_read_tokens = counts["cache_read_input_tokens"]
                record.output_tokens = counts["output_tokens"]
                record.context_tokens = context
                record.is_sidechain = sidechain
                pending.sidechain = sidechain
        self._merge_blocks(pending, message.get("content"), key, agent_id)

    def _key_for(
        self, message: dict, entry: dict, session_id: str, sidechain: bool, line: int
    ) -> str:
        message_id = message.get("id")
        request_id = entry.get("requestId")
        if not isinstance(message_id, str) or not message_id:
            return f"line:{line}"
        key = (
            f"{message_id}:{request_id}"
            if isinstance(request_id, str) and request_id
            else message_id
        )
        known = self._msgid_to_key.get(message_id)
        if known and known != key:
            other = self._pending.get(known)
            # /btw side questions replay a message under another requestId: same call.
            if sidechain or (other is not None and other.sidechain):
                return known
        self._msgid_to_key[message_id] = key
        if len(self._msgid_to_key) > RECENT_KEYS:
            self._msgid_to_key.pop(next(iter(self._msgid_to_key)))
        return key

    def _merge_blocks(self, pending: _Pending, content, key: str, agent_id: str) -> None:
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            marker = (kind, block.get("id") or block.get("text") or block.get("thinking"))
            if marker in pending.block_keys:
                continue
            pending.block_keys.add(marker)
            if kind == "text":
                pending.blocks.append({"type": "text", "text": str(block.get("text", ""))})
            elif kind == "thinking":
                pending.blocks.append({"type": "thinking", "text": str(block.get("thinking", ""))})
            elif kind == "tool_use":
                name = str(block.get("name") or "")
                tool_input = block.get("input")
                tool_id = str(block.get("id") or "")
                pending.blocks.append(
                    {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
                )
                token, touches = signature_and_touches(name, tool_input)
                pending.record.signature.append(token)
                pending.record.touches.extend(touches)
                if tool_id:
                    pending.open_tools.add(tool_id)
                    self._tool_owner[tool_id] = key
                if name in SPAWN_TOOLS and agent_id == "main" and isinstance(tool_input, dict):
                    prompt = tool_input.get("prompt")
                    if isinstance(prompt, str) and prompt.strip():
                        self._spawn_prompts[prompt.strip()] = (
                            tool_id,
                            str(tool_input.get("description") or ""),
                            str(tool_input.get("subagent_type") or ""),
                        )

    # --- user and system lines ------------------------------------------------

    def _user(self, entry: dict, line: int, session_id: str, agent_id: str) -> Iterator:
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if entry.get("isCompactSummary"):
            text = content if isinstance(content, str) else _text_of(content)
            yield from self._compact_summary(entry, line, text, session_id, agent_id)
            return
        self.stats.ignored_lines += 1
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self._attach_result(block)
            prompt = _text_of(
                [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
            )
        else:
            prompt = content if isinstance(content, str) else ""
        if prompt and not entry.get("isMeta"):
            self._prompts[agent_id] = prompt[:MAX_RESULT_CHARS]

    def _attach_result(self, block: dict) -> None:
        tool_id = block.get("tool_use_id")
        key = self._tool_owner.pop(tool_id, None) if isinstance(tool_id, str) else None
        pending = self._pending.get(key) if key else None
        if pending is None:
            return
        raw = block.get("content")
        text = raw if isinstance(raw, str) else _text_of(raw)
        results = pending.record.text.setdefault("results", {})
        results[tool_id] = {
            "content": text[:MAX_RESULT_CHARS],
            "is_error": bool(block.get("is_error")),
            "truncated_chars": max(0, len(text) - MAX_RESULT_CHARS),
        }
        pending.open_tools.discard(tool_id)

    def _system(self, entry: dict, line: int, session_id: str, agent_id: str) -> Iterator:
        subtype = entry.get("subtype")
        if subtype not in {"compact_boundary", "microcompact_boundary"}:
            self.stats.ignored_lines += 1
            return
        if self._open_compaction is not None:
            yield self._open_compaction
        micro = subtype == "microcompact_boundary"
        meta = entry.get("microcompactMetadata" if micro else "compactMetadata")
        if not isinstance(meta, dict):
            meta = (
                entry.get("compact_metadata")
                if isinstance(entry.get("compact_metadata"), dict)
                else {}
            )
        trigger = meta.get("trigger")
        self.stats.records += 1
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
    ) -> Iterator:
        compaction = self._open_compaction
        if compaction is None:
            # Old builds wrote only the summary message: the boundary is implied.
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
        self._open_compaction = None
        yield compaction

    # --- flushing -----------------------------------------------------------------

    def _flush(self, line: int) -> Iterator[CallRecord]:
        if len(self._pending) <= FLUSH_WINDOW:
            return
        for key in list(self._pending):
            if len(self._pending) <= FLUSH_WINDOW:
                break
            pending = self._pending[key]
            if pending.open_tools and line - pending.first_line < WAIT_WINDOW_LINES:
                continue
            yield self._emit(key)

    def _flush_all(self) -> Iterator:
        for key in list(self._pending):
            yield self._emit(key)
        if self._open_compaction is not None:
            yield self._open_compaction
            self._open_compaction = None

    def _emit(self, key: str) -> CallRecord:
        pending = self._pending.pop(key)
        for tool_id in pending.open_tools:
            self._tool_owner.pop(tool_id, None)
        record = pending.record
        record.text["blocks"] = pending.blocks
        self._recent_keys[key] = None
        if len(self._recent_keys) > RECENT_KEYS:
            self._recent_keys.popitem(last=False)
        self.stats.records += 1
        return record


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
