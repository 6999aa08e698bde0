"""Bounded reads that return excerpts: every excerpt knows its exact place in the source.

An excerpt's `start_byte`/`end_byte` (end exclusive) and `start_line`/`end_line` (1-based,
inclusive) locate it in the stored bytes; its `sha256` fingerprints those bytes, so a
client can resolve any excerpt against the artifact and check it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

from artifacts.content.lines import (
    LimitExceeded,
    LineIndex,
    lines_in,
    read_span,
    scan_back,
    scan_forward,
    sha256_hex,
)


class RangeError(ValueError):
    """A requested range that does not exist in the artifact; names the parameter."""


@dataclass(frozen=True)
class Excerpt:
    start_line: int
    end_line: int
    start_byte: int
    end_byte: int
    data: bytes
    clipped: bool = False

    @property
    def sha256(self) -> str:
        return sha256_hex(self.data)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")

    @property
    def bytes(self) -> int:
        return len(self.data)

    @property
    def line_count(self) -> int:
        return lines_in(self.data)


def _excerpt(f: BinaryIO, start: int, end: int, first_line: int) -> Excerpt:
    data = read_span(f, start, end)
    count = lines_in(data)
    return Excerpt(
        start_line=first_line,
        end_line=first_line + count - 1,
        start_byte=start,
        end_byte=end,
        data=data,
    )


def _check_lines(lines: int, max_lines: int, name: str = "lines") -> None:
    if lines < 1:
        raise RangeError(f"{name}: must be at least 1")
    if lines > max_lines:
        raise LimitExceeded(
            "max_read_lines", max_lines, f"{name}={lines:,} asks for too many lines"
        )


def tail(f: BinaryIO, index: LineIndex, *, lines: int, max_lines: int, max_bytes: int) -> Excerpt:
    _check_lines(lines, max_lines)
    start = scan_back(f, end=index.size, lines=lines, max_bytes=max_bytes, limit="max_read_bytes")
    data = read_span(f, start, index.size)
    first_line = index.lines - lines_in(data) + 1
    return Excerpt(first_line, index.lines, start, index.size, data)


def head(f: BinaryIO, index: LineIndex, *, lines: int, max_lines: int, max_bytes: int) -> Excerpt:
    _check_lines(lines, max_lines)
    end = scan_forward(f, start=0, lines=lines, max_bytes=max_bytes, limit="max_read_bytes")
    return _excerpt(f, 0, end, 1)


def line_range(
    f: BinaryIO,
    index: LineIndex,
    *,
    start_line: int,
    end_line: int,
    max_lines: int,
    max_bytes: int,
) -> Excerpt:
    if start_line < 1:
        raise RangeError("start_line: lines are numbered from 1")
    if end_line < start_line:
        raise RangeError(f"end_line: {end_line} is before start_line {start_line}")
    if start_line > index.lines:
        raise RangeError(
            f"start_line: {start_line:,} is past the last line ({index.lines:,})"
            if index.lines
            else "start_line: the artifact is empty"
        )
    end_line = min(end_line, index.lines)
    _check_lines(end_line - start_line + 1, max_lines, "end_line - start_line + 1")
    start = index.line_start(f, start_line)
    end = index.line_start(f, end_line + 1)
    if end - start > max_bytes:
        raise LimitExceeded(
            "max_read_bytes",
            max_bytes,
            f"lines {start_line:,}–{end_line:,} are {end - start:,} bytes",
        )
    return _excerpt(f, start, end, start_line)


def byte_range(
    f: BinaryIO, index: LineIndex, *, start_byte: int, end_byte: int, max_bytes: int
) -> Excerpt:
    if start_byte < 0:
        raise RangeError("start_byte: must be 0 or more")
    if end_byte <= start_byte:
        raise RangeError(
            f"end_byte: must be greater than start_byte ({start_byte}); it is exclusive"
        )
    if start_byte >= index.size:
        raise RangeError(f"start_byte: {start_byte:,} is past the end ({index.size:,} bytes)")
    end_byte = min(end_byte, index.size)
    if end_byte - start_byte > max_bytes:
        raise LimitExceeded(
            "max_read_bytes",
            max_bytes,
            f"bytes {start_byte:,}–{end_byte:,} are {end_byte - start_byte:,} bytes",
        )
    return _excerpt(f, start_byte, end_byte, index.line_of(f, start_byte))


def context_excerpt(
    f: BinaryIO,
    index: LineIndex,
    *,
    line: int,
    line_start: int,
    line_end: int,
    context: int,
    max_bytes: int,
    match_start: int,
    match_end: int,
    clip_window: int = 512,
) -> Excerpt:
    """Lines around a match. Too long: just the match line; still too long: a byte window."""
    try:
        start = scan_back(f, end=line_start, lines=context, max_bytes=max_bytes, limit="excerpt")
        end = scan_forward(f, start=line_end, lines=context, max_bytes=max_bytes, limit="excerpt")
        if end - start <= max_bytes:
            data = read_span(f, start, end)
            first_line = line - data.count(b"\n", 0, line_start - start)
            return Excerpt(first_line, first_line + lines_in(data) - 1, start, end, data)
    except LimitExceeded:
        pass
    if line_end - line_start <= max_bytes:
        return _excerpt(f, line_start, line_end, line)
    start = max(line_start, match_start - clip_window)
    end = min(line_end, max(match_end, start) + clip_window, start + max_bytes)
    data = read_span(f, start, end)
    return Excerpt(line, line, start, end, data, clipped=True)
