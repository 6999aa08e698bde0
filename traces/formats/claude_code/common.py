"""What the Claude Code parser's parts share: limits, the pending call, small readers. No Django."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from traces.formats.records import (
    CallRecord,
    CompactionRecord,
)

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
