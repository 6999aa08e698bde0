"""Normalised records that every trace parser yields. Plain Python: no Django."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from traces.formats.tools import tool_use_signatures


@dataclass(slots=True)
class SessionInfo:
    harness: str
    external_id: str
    project: str = ""
    git_branch: str = ""
    harness_version: str = ""
    title: str = ""


@dataclass(slots=True)
class AgentInfo:
    harness: str
    session_id: str
    agent_id: str
    kind: str = "subagent"  # main | subagent | compaction
    parent_agent_id: str | None = "main"
    agent_type: str = ""
    description: str = ""
    spawn_tool_call_id: str = ""
    start_kind: str = "unknown"  # fresh | fork | unknown


@dataclass(slots=True)
class CallRecord:
    """One deduplicated API call. Token fields follow Anthropic's split:
    `input_tokens` is uncached input, and the context is the prompt size the call carried."""

    harness: str
    session_id: str
    agent_id: str
    key: str
    timestamp: datetime
    model: str
    input_tokens: int
    cache_creation_tokens: int
    cache_read_tokens: int
    output_tokens: int
    reasoning_tokens: int
    context_tokens: int
    line: int
    is_sidechain: bool = False
    signature: list[str] = field(default_factory=list)
    touches: list[tuple[str, str]] = field(default_factory=list)  # (mode, path)
    text: dict = field(default_factory=dict)
    reemitted: bool = False  # the parser emitted this call before (a late streamed line)
    source_file_id: int | None = None  # set by the loader: the file it was read from
    cache_creation_1h_tokens: int = 0  # of cache_creation_tokens, the 1-hour cache writes


@dataclass(slots=True)
class CompactionRecord:
    harness: str
    session_id: str
    agent_id: str
    key: str
    timestamp: datetime | None
    trigger: str  # auto | manual | unknown
    line: int
    kind: str = "full"  # full | micro
    pre_tokens: int | None = None
    post_tokens: int | None = None
    summary_tokens: int | None = None
    summary_estimated: bool = False
    duration_ms: int | None = None


@dataclass(slots=True)
class ParseError:
    line: int | None
    message: str


@dataclass(slots=True)
class ParseStats:
    lines: int = 0
    calls: int = 0
    compactions: int = 0
    usage_lines: int = 0
    duplicates_dropped: int = 0
    malformed_lines: int = 0
    ignored_lines: int = 0


# Far above any real call (context windows hold millions of tokens), and low enough that a
# session's sums over millions of calls still fit the database's 64-bit integers.
MAX_TOKEN_COUNT = 10**12
CALL_COUNTS = (
    "input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens", "reasoning_tokens",
    "cache_creation_1h_tokens",
)  # fmt: skip
COMPACTION_COUNTS = ("pre_tokens", "post_tokens", "summary_tokens", "duration_ms")


def implausible_counts(record: CallRecord | CompactionRecord) -> list[str]:
    """The count fields of a call or compaction above MAX_TOKEN_COUNT."""
    names = CALL_COUNTS if isinstance(record, CallRecord) else COMPACTION_COUNTS
    return [name for name in names if (getattr(record, name) or 0) > MAX_TOKEN_COUNT]


def estimate_tokens(text: str) -> int:
    """A rough token estimate (about 4 characters per token), used only where no count exists."""
    return (len(text) + 3) // 4


def kept_line_wins(
    *, new_sidechain: bool, new_output: int, old_sidechain: bool, old_output: int
) -> bool:
    """The streaming rule for two lines of one call: a main-thread line beats a sidechain
    line, then the higher output count, the later line on a tie."""
    if new_sidechain != old_sidechain:
        return not new_sidechain
    return new_output >= old_output


def merge_call_records(earlier: CallRecord, later: CallRecord) -> CallRecord:
    """One call from two emissions of it (a late streamed line, or a copy in another file).

    The counts come from the line `kept_line_wins` keeps; the content blocks, tool results,
    signature and touches are the union of both, without repeating what both hold."""
    keep_later = kept_line_wins(
        new_sidechain=later.is_sidechain,
        new_output=later.output_tokens,
        old_sidechain=earlier.is_sidechain,
        old_output=earlier.output_tokens,
    )
    winner = later if keep_later else earlier
    loser = earlier if keep_later else later
    blocks = list(earlier.text.get("blocks") or [])
    added = [block for block in later.text.get("blocks") or [] if block not in blocks]
    merged_text = {**loser.text, **winner.text}
    if blocks or added:
        merged_text["blocks"] = blocks + added
    results = {**(earlier.text.get("results") or {}), **(later.text.get("results") or {})}
    if results:
        merged_text["results"] = results
    prompt = earlier.text.get("prompt") or later.text.get("prompt")
    if prompt:
        merged_text["prompt"] = prompt
    added_tokens, added_touches = tool_use_signatures(added)
    signature = [*earlier.signature, *added_tokens]
    touches = [*earlier.touches, *added_touches]
    winner.text = merged_text
    winner.timestamp = min(earlier.timestamp, later.timestamp)  # a call is placed by its first line
    winner.line = earlier.line
    winner.signature = signature
    winner.touches = touches
    winner.reemitted = earlier.reemitted
    return winner
