"""Numbered lines with highlighted match spans, for showing an excerpt to a person.

Returns plain text segments; the template escapes them, so artifact text is never markup.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    text: str
    match: bool


@dataclass(frozen=True)
class Row:
    number: int
    segments: list[Segment]


def rows(
    data: bytes, *, first_line: int, start_byte: int, spans: list[tuple[int, int]] = ()
) -> list[Row]:
    """Split an excerpt into lines; `spans` are absolute [start, end) byte ranges to mark."""
    result: list[Row] = []
    position = start_byte
    for number, line in enumerate(data.splitlines(keepends=True), start=first_line):
        body = line.rstrip(b"\r\n")
        line_end = position + len(body)
        segments: list[Segment] = []
        cursor = position
        for span_start, span_end in sorted(spans):
            start, end = max(span_start, position), min(span_end, line_end)
            if start >= end or start < cursor:
                continue
            if start > cursor:
                segments.append(Segment(_text(body, position, cursor, start), False))
            segments.append(Segment(_text(body, position, start, end), True))
            cursor = end
        if cursor < line_end or not segments:
            segments.append(Segment(_text(body, position, cursor, line_end), False))
        result.append(Row(number, segments))
        position += len(line)
    return result


def _text(body: bytes, origin: int, start: int, end: int) -> str:
    return body[start - origin : end - origin].decode("utf-8", errors="replace")
