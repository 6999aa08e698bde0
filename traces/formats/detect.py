"""Which trace format a file holds, from its first records or else its path. No Django.

`detect_format(name, stream)` reads whole lines until one is a record that names its
format, within a bound (`DETECT_MAX_LINES` lines or `DETECT_MAX_BYTES` bytes, whichever
comes first). When no line does, the path layout decides. Nothing read is lost: the
parser iterates (or reads) `Detection.replay()`, which gives back the lines detection
read, then the rest of the stream.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import BinaryIO

import orjson

from traces.formats.archive import READ_ERRORS

DETECT_MAX_LINES = 100
DETECT_MAX_BYTES = 8 * 1024 * 1024
COMPLETION_CHUNK = 1 << 20  # a line longer than the bound is completed this much at a time
CLAUDE_TYPES = {"summary", "user", "assistant", "system"}
CODEX_TYPES = {
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
    "token_usage_record",
}
NOT_RECOGNISED = "not a recognised trace format (Claude Code, Codex or OTLP/JSON)"
PROBLEMS_SHOWN = 3
JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
JSON_TYPES[type(None)] = "null"

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# (pattern on the path with "/" separators, format). Archive members keep their folders;
# a plain upload or a CLI file is known by its base name only.
PATH_LAYOUTS = (
    (re.compile(r"(?:^|/)rollout-[^/]*\.jsonl$"), "codex"),  # sessions/YYYY/MM/DD/rollout-*
    (re.compile(r"(?:^|/)agent-[^/]+\.jsonl$"), "claude-code"),  # subagents/agent-<id>
    (re.compile(r"(?:^|/)projects/[^/]+/[^/]+\.jsonl$"), "claude-code"),
    (re.compile(rf"(?:^|/){_UUID}\.jsonl$", re.IGNORECASE), "claude-code"),
)


def format_from_record(entry: dict) -> str | None:
    """The format a parsed JSON object names, or None."""
    if "resourceSpans" in entry:
        return "otlp-json"
    if "payload" in entry and entry.get("type") in CODEX_TYPES:
        return "codex"
    if "sessionId" in entry or entry.get("type") in CLAUDE_TYPES:
        return "claude-code"
    return None


def format_from_path(name: str) -> str | None:
    """The format the path layout names (Claude Code's and Codex's own file names), or None."""
    path = name.replace("\\", "/")
    for pattern, fmt in PATH_LAYOUTS:
        if pattern.search(path):
            return fmt
    return None


@dataclass
class Detection:
    format: str | None
    decided_by: str  # "content", "path", or "" when nothing decided
    line: int | None  # the line that named the format, else the first line found wrong
    reason: str  # why the file is not recognised (empty when it is)
    empty: bool = False
    _lines: list[bytes] = field(default_factory=list, repr=False)
    _partial: bytes = field(default=b"", repr=False)  # the start of a line over the bound
    _stream: BinaryIO | None = field(default=None, repr=False)
    _error: BaseException | None = field(default=None, repr=False)

    def replay(self) -> Replay:
        """The whole stream again, from its first byte; call once."""
        replay = Replay(self._lines, self._partial, self._stream, self._error)
        # The replay owns the bytes read, so that they are freed once the parser is past them.
        self._lines, self._partial = [], b""
        return replay


class Replay:
    """The lines detection read, then the rest of the stream: iterate it for lines, or
    `read()` it. A line that was longer than the bound is completed in place (a
    bytearray, so that a huge line is not held twice while it is joined)."""

    def __init__(self, lines, partial, stream, error):
        self._lines = lines
        self._partial = partial
        self._stream = stream
        self._error = error

    def __iter__(self) -> Iterator[bytes]:
        # chain: past the replayed lines, the parser iterates the stream itself, at C speed.
        return chain.from_iterable(self._parts())

    def _parts(self):
        lines, self._lines = self._lines, []
        yield lines
        del lines  # the chain is past them: free them
        if self._partial:
            yield self._completed_line()
        yield self._failure() if self._error else self._stream

    def _completed_line(self) -> Iterator[bytearray]:
        line = bytearray(self._partial)
        self._partial = b""
        while not line.endswith(b"\n"):
            piece = self._stream.readline(COMPLETION_CHUNK)
            if not piece:
                break
            line += piece
        yield line

    def _failure(self) -> Iterator[bytes]:
        yield from ()
        raise self._error

    def read(self, size: int = -1) -> bytes:
        head = b"".join(self._lines) + self._partial
        self._lines, self._partial = [], b""
        if size is not None and 0 <= size <= len(head):
            if size < len(head):
                self._lines = [head[size:]]
            return head[:size]
        if self._error:
            raise self._error
        rest = (
            self._stream.read() if size is None or size < 0 else self._stream.read(size - len(head))
        )
        return head + rest


def detect_format(
    name: str,
    stream: BinaryIO,
    *,
    max_lines: int = DETECT_MAX_LINES,
    max_bytes: int = DETECT_MAX_BYTES,
) -> Detection:
    """Read whole lines of `stream` until one names the format, within the bound; then
    fall back on the path layout of `name`. The stream must offer `readline(limit)`."""
    lines: list[bytes] = []
    problems: list[tuple[int, str]] = []
    partial = b""
    error = None
    at_end = False
    size = 0
    found = None
    while len(lines) < max_lines and size < max_bytes:
        try:
            line = stream.readline(max_bytes - size)
        except READ_ERRORS as exc:
            error = exc
            break
        if not line:
            at_end = True
            break
        size += len(line)
        if size >= max_bytes and not line.endswith(b"\n"):
            partial = line
            break
        lines.append(line)
        found = _line_format(line, len(lines), problems)
        if found:
            break
    base = {"_lines": lines, "_partial": partial, "_stream": stream, "_error": error}
    if found:
        return Detection(found, "content", len(lines), "", **base)
    if at_end and not problems:
        return Detection(None, "", None, "empty file (nothing to ingest)", empty=True, **base)
    by_path = format_from_path(name)
    stopped_at = len(lines) + 1 if partial or error else None  # the line not read whole
    first_wrong = problems[0][0] if problems else stopped_at
    if by_path:
        return Detection(by_path, "path", first_wrong, "", **base)
    return Detection(
        None,
        "",
        first_wrong,
        _explain(problems, len(lines), at_end, partial, error, max_bytes),
        **base,
    )


def _line_format(line: bytes, number: int, problems: list[tuple[int, str]]) -> str | None:
    if not line.strip():
        return None
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        # A pretty-printed OTLP/JSON document: its first lines are not JSON on their own.
        if b'"resourceSpans"' in line[:4096]:
            return "otlp-json"
        problems.append((number, f"malformed JSON: {exc}"))
        return None
    if type(entry) is not dict:
        problems.append((number, f"a JSON {JSON_TYPES[type(entry)]}, not an object"))
        return None
    found = format_from_record(entry)
    if found is None:
        kind = entry.get("type")
        named = f" (type {kind!r})" if isinstance(kind, str) else ""
        problems.append((number, f"a JSON object of no known format{named}"))
    return found


def _explain(problems, lines_read, at_end, partial, error, max_bytes) -> str:
    if error is not None:
        looked = (
            f"reading stopped in line {lines_read + 1:,}, truncated or corrupt: "
            f"{str(error) or type(error).__name__}"
        )
    elif partial:
        looked = (
            f"line {lines_read + 1:,} is longer than {max_bytes:,} bytes, the most read to "
            "detect a format"
        )
    elif at_end:
        looked = f"read {_lines_range(lines_read)} to the end of the file"
    else:
        looked = f"read {_lines_range(lines_read)}, the most read to detect a format"
    if not problems and not partial and not error:
        looked += ": blank lines only"
    shown = "; ".join(f"line {n:,}: {what}" for n, what in problems[:PROBLEMS_SHOWN])
    if len(problems) > PROBLEMS_SHOWN:
        shown += f"; and {len(problems) - PROBLEMS_SHOWN:,} more lines"
    detail = f"{looked}; {shown}" if shown else looked
    return f"{NOT_RECOGNISED}: {detail}; its path is not a Claude Code or Codex file layout"


def _lines_range(count: int) -> str:
    return "line 1" if count == 1 else f"lines 1–{count:,}"
