"""Search a stored artifact in one streaming pass: plain text or a regex with a deadline.

Blocks end at line boundaries, so line numbers come from counting newlines as the scan
moves, and memory stays bounded by the block size (a line longer than `MAX_LINE` is
searched in pieces that overlap by the query's length for plain text). A regex match
that spans a line break is reported on the line where it starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import BinaryIO

import regex

BLOCK = 4 * 1024 * 1024
MAX_LINE = 16 * 1024 * 1024
MAX_QUERY = 1000


class SearchError(ValueError):
    """A query that cannot run; the message names the parameter and the reason."""


class SearchTimeout(SearchError):
    pass


@dataclass(frozen=True)
class Hit:
    line: int
    start_byte: int
    end_byte: int
    line_start: int
    line_end: int


@dataclass
class ScanResult:
    hits: list[Hit]
    more: bool
    scanned_bytes: int


class Matcher:
    """A compiled query. Plain text is matched with bytes.find; a regex with `regex`."""

    def __init__(self, query: str, *, is_regex: bool, ignore_case: bool, timeout: float):
        if not query:
            raise SearchError("q: give the text to search for")
        if len(query) > MAX_QUERY:
            raise SearchError(f"q: at most {MAX_QUERY} characters")
        self.is_regex = is_regex
        self.ignore_case = ignore_case
        self.timeout = timeout
        needle = query.encode()
        if is_regex:
            flags = regex.IGNORECASE if ignore_case else 0
            try:
                self.pattern = regex.compile(needle, flags)
            except regex.error as exc:
                raise SearchError(f"q: not a valid regular expression ({exc})") from None
            if self.pattern.search(b"") is not None:
                raise SearchError("q: the regular expression matches empty text")
            self.overlap = 0
        else:
            self.needle = needle.lower() if ignore_case else needle
            self.overlap = len(needle) - 1

    def spans(self, block: bytes, deadline: float):
        """(start, end) of each match in the block, in order."""
        if self.is_regex:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout()
            try:
                for match in self.pattern.finditer(block, timeout=remaining):
                    if match.end() > match.start():
                        yield match.start(), match.end()
            except TimeoutError:
                raise self._timeout() from None
            return
        haystack = block.lower() if self.ignore_case else block
        size = len(self.needle)
        index = haystack.find(self.needle)
        while index != -1:
            yield index, index + size
            index = haystack.find(self.needle, index + size)

    def _timeout(self) -> SearchTimeout:
        return SearchTimeout(
            f"q: the regular expression ran longer than the {self.timeout:g} s search timeout; "
            "make it more specific, or search plain text"
        )


def scan(
    f: BinaryIO, *, size: int, matcher: Matcher, max_hits: int, block_size: int = BLOCK
) -> ScanResult:
    """Find up to `max_hits` matches; `more` says whether the scan stopped early."""
    deadline = time.monotonic() + matcher.timeout
    hits: list[Hit] = []
    f.seek(0)
    offset = 0  # absolute offset of buf[0]
    line = 1  # the line holding buf[0]
    line_start = 0  # where that line starts
    reported_to = 0  # matches are not overlapping: none may start before the last one ended
    buf = b""
    eof = False
    while True:
        if not eof:
            chunk = f.read(block_size)
            eof = not chunk
            buf += chunk
        if not buf:
            break
        cut = _block_end(buf, eof)
        if cut is None:
            continue
        cut, forced = cut
        block = buf[:cut]
        counted_to = 0
        for start, end in matcher.spans(block, deadline):
            if offset + start < reported_to:
                continue
            if len(hits) == max_hits:
                return ScanResult(hits, True, offset + start)
            line += block.count(b"\n", counted_to, start)
            counted_to = start
            hits.append(_hit(block, offset, start, end, line=line, line_start=line_start))
            reported_to = offset + end
        # A forced cut falls inside one long line: keep enough of its end to find a match
        # that straddles the cut. Such a block has no newline, so line state is unchanged.
        consumed = len(block) - (min(matcher.overlap, len(block)) if forced else 0)
        line += block.count(b"\n", counted_to, consumed)
        last_newline = block.rfind(b"\n", 0, consumed)
        if last_newline != -1:
            line_start = offset + last_newline + 1
        offset += consumed
        buf = buf[consumed:]
        if eof and not forced:
            break
    return ScanResult(hits, False, size)


def _block_end(buf: bytes, eof: bool) -> tuple[int, bool] | None:
    """Where to cut `buf` into a block of whole lines, and whether the cut is forced inside
    one long line; None to read more first."""
    if eof:
        return len(buf), False
    cut = buf.rfind(b"\n") + 1
    if cut:
        return cut, False
    if len(buf) < MAX_LINE:
        return None
    return len(buf), True


def _hit(block: bytes, offset: int, start: int, end: int, *, line: int, line_start: int) -> Hit:
    """The match at block[start:end] (the block starts at `offset`), with its line's bounds;
    `line_start` is where the line holding block[0] starts."""
    newline_before = block.rfind(b"\n", 0, start)
    hit_line_start = offset + newline_before + 1 if newline_before != -1 else line_start
    newline_after = block.find(b"\n", max(start, end - 1))
    hit_line_end = offset + (newline_after + 1 if newline_after != -1 else len(block))
    return Hit(line, offset + start, offset + end, hit_line_start, hit_line_end)
