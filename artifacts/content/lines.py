"""Line counting and a sparse line index built while bytes stream past, plus bounded reads.

The index records, every `STRIDE` bytes, how many newlines came before that offset. Finding
where line N starts then costs one seek and at most `STRIDE` bytes of reading, whatever the
artifact's size or its line lengths. Tail and head read from an end, block by block, and
stop as soon as they have their lines or pass the byte limit.
"""

from __future__ import annotations

import bisect
import hashlib
import sys
from array import array
from dataclasses import dataclass
from typing import BinaryIO

STRIDE = 64 * 1024
BLOCK = 64 * 1024
_FORMAT_VERSION = 1
NEWLINE = 0x0A


class LimitExceeded(Exception):
    """A read would return more than a limit allows; names the limit and what was needed."""

    def __init__(self, limit: str, allowed: int, needed: str):
        self.limit, self.allowed, self.needed = limit, allowed, needed
        super().__init__(f"{needed}; the {limit} limit is {allowed:,}")


def count_lines(*, size: int, newlines: int, last_byte: int | None) -> int:
    """Lines as a person counts them: a last line without a newline still counts."""
    if size == 0:
        return 0
    return newlines + (0 if last_byte == NEWLINE else 1)


def lines_in(data: bytes) -> int:
    if not data:
        return 0
    return data.count(b"\n", 0, len(data) - 1) + 1


class LineIndexBuilder:
    """Feed every stored byte in order; `finish()` returns the index."""

    def __init__(self, stride: int = STRIDE):
        self.stride = stride
        self.size = 0
        self.newlines = 0
        self.last_byte: int | None = None
        self.checkpoints = array("Q", [0])

    def update(self, chunk: bytes) -> None:
        if not chunk:
            return
        start = self.size
        end = start + len(chunk)
        boundary = len(self.checkpoints) * self.stride
        counted, newlines = 0, self.newlines
        while boundary <= end:
            cut = boundary - start
            newlines += chunk.count(b"\n", counted, cut)
            counted = cut
            self.checkpoints.append(newlines)
            boundary += self.stride
        self.newlines = newlines + chunk.count(b"\n", counted)
        self.size = end
        self.last_byte = chunk[-1]

    def finish(self) -> LineIndex:
        return LineIndex(
            stride=self.stride,
            size=self.size,
            newlines=self.newlines,
            lines=count_lines(size=self.size, newlines=self.newlines, last_byte=self.last_byte),
            checkpoints=self.checkpoints,
        )


@dataclass
class LineIndex:
    stride: int
    size: int
    newlines: int
    lines: int
    checkpoints: array

    def to_bytes(self) -> bytes:
        header = array("Q", [_FORMAT_VERSION, self.stride, self.size, self.newlines, self.lines])
        data = header + self.checkpoints
        if sys.byteorder == "big":
            data.byteswap()
        return data.tobytes()

    @classmethod
    def from_bytes(cls, raw: bytes) -> LineIndex:
        data = array("Q")
        data.frombytes(bytes(raw))
        if sys.byteorder == "big":
            data.byteswap()
        if len(data) < 6 or data[0] != _FORMAT_VERSION:
            raise ValueError("not a line index (or an unknown version)")
        return cls(
            stride=data[1], size=data[2], newlines=data[3], lines=data[4], checkpoints=data[5:]
        )

    def newlines_before(self, f: BinaryIO, offset: int) -> int:
        """How many newlines lie in bytes [0, offset)."""
        offset = max(0, min(offset, self.size))
        k = min(offset // self.stride, len(self.checkpoints) - 1)
        base = k * self.stride
        f.seek(base)
        return self.checkpoints[k] + f.read(offset - base).count(b"\n")

    def line_of(self, f: BinaryIO, offset: int) -> int:
        """The 1-based line holding the byte at `offset`."""
        return self.newlines_before(f, offset) + 1

    def line_start(self, f: BinaryIO, line: int) -> int:
        """Byte offset where 1-based `line` starts; `size` past the last line."""
        if line <= 1:
            return 0
        target = line - 1  # the newline that ends the line before
        if target > self.newlines:
            return self.size
        k = bisect.bisect_right(self.checkpoints, target - 1) - 1
        position = k * self.stride
        remaining = target - self.checkpoints[k]
        f.seek(position)
        while True:
            block = f.read(self.stride)
            if not block:
                return self.size
            found = block.count(b"\n")
            if found >= remaining:
                index = -1
                for _ in range(remaining):
                    index = block.index(b"\n", index + 1)
                return position + index + 1
            remaining -= found
            position += len(block)


def scan_back(f: BinaryIO, *, end: int, lines: int, max_bytes: int, limit: str) -> int:
    """Start offset of the last `lines` lines that end at `end` (a line boundary)."""
    if lines <= 0 or end <= 0:
        return end
    # A newline right before `end` terminates the last line; it does not start one.
    f.seek(end - 1)
    stop = end - 1 if f.read(1) == b"\n" else end
    position = stop
    needed = lines
    while position > 0:
        block_start = max(0, position - BLOCK)
        f.seek(block_start)
        block = f.read(position - block_start)
        index = len(block)
        while needed:
            index = block.rfind(b"\n", 0, index)
            if index == -1:
                break
            needed -= 1
        if not needed:
            start = block_start + index + 1
            _check(end - start, max_bytes, limit, f"the last {lines:,} lines")
            return start
        position = block_start
        _check(end - position, max_bytes, limit, f"the last {lines:,} lines")
    return 0


def scan_forward(f: BinaryIO, *, start: int, lines: int, max_bytes: int, limit: str) -> int:
    """End offset (exclusive) of the `lines` lines that begin at `start` (a line boundary)."""
    if lines <= 0:
        return start
    f.seek(start)
    position = start
    needed = lines
    while True:
        block = f.read(BLOCK)
        if not block:
            return position
        index = -1
        while needed:
            index = block.find(b"\n", index + 1)
            if index == -1:
                break
            needed -= 1
        if not needed:
            end = position + index + 1
            _check(end - start, max_bytes, limit, f"{lines:,} lines from byte {start:,}")
            return end
        position += len(block)
        _check(position - start, max_bytes, limit, f"{lines:,} lines from byte {start:,}")


def _check(size: int, max_bytes: int, limit: str, what: str) -> None:
    if size > max_bytes:
        raise LimitExceeded(limit, max_bytes, f"{what} take more than {max_bytes:,} bytes")


def read_span(f: BinaryIO, start: int, end: int) -> bytes:
    f.seek(start)
    return f.read(end - start)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
