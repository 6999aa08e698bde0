"""Streaming parser for Claude Code session transcripts (JSONL). No Django.

Handles the main session file, `subagents/agent-<id>.jsonl` files (with their
`.meta.json` sidecar passed in as `meta`), inline `isSidechain` lines of 1.0.x, and
`compact_boundary` / `microcompact_boundary` records with the `isCompactSummary` message.

Deduplication follows TRACE_FORMATS.md: lines are grouped by (session, message.id,
requestId) — message.id alone when requestId is missing; within a group a main-thread
line beats a sidechain line, then the highest `output_tokens` wins, the last on a tie.
Content blocks of all lines of a group are merged, since Claude Code writes one line per
streamed content block.

A package: the parser (`parser.py`) with its assistant-line (`assistant.py`) and
user/system-line (`user_system.py`) parts, and what they share (`common.py`).
"""

from traces.formats.claude_code.common import (
    FLUSH_WINDOW,
    HARNESS,
    KNOWN_TYPES,
    MAX_RESULT_CHARS,
    RECENT_KEYS,
    SPAWN_TOOLS,
    STATE_CHAIN,
    STATE_ITEMS,
    USAGE_FIELDS,
    WAIT_WINDOW_LINES,
    agent_id_from_path,
    parse_timestamp,
)
from traces.formats.claude_code.parser import ClaudeCodeParser

__all__ = [
    "FLUSH_WINDOW",
    "HARNESS",
    "KNOWN_TYPES",
    "MAX_RESULT_CHARS",
    "RECENT_KEYS",
    "SPAWN_TOOLS",
    "STATE_CHAIN",
    "STATE_ITEMS",
    "USAGE_FIELDS",
    "WAIT_WINDOW_LINES",
    "ClaudeCodeParser",
    "agent_id_from_path",
    "parse_timestamp",
]
