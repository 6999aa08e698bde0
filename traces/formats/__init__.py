"""Pure, streaming trace parsers. Nothing here imports Django.

`detect_format(name, stream)` finds the format of a file from its first records, or else
its path (see `detect.py`); `make_parser(fmt, name, meta).parse(detection.replay())`
yields normalised records (see `records.py`), with `ParseError`s for the lines it had to
skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import orjson

from traces.formats.claude_code import ClaudeCodeParser
from traces.formats.codex import CodexParser
from traces.formats.detect import Detection, detect_format
from traces.formats.otlp import OtlpDecodeError, normalise, spans_from_json
from traces.formats.records import ParseError, ParseStats

__all__ = ["FORMATS", "Detection", "detect_format", "make_parser"]

FORMATS = ("claude-code", "codex", "otlp-json")
MAX_OTLP_DOCUMENT = 64 * 1024 * 1024


class _OtlpFileParser:
    """An OTLP/JSON file: one request document, or one request per line (collector file exporter)."""

    def __init__(self, name: str):
        self.name = name
        self.stats = ParseStats()

    def parse(self, stream: BinaryIO) -> Iterator:
        data = stream.read(MAX_OTLP_DOCUMENT + 1)
        if len(data) > MAX_OTLP_DOCUMENT:
            yield ParseError(
                None, f"OTLP/JSON file larger than {MAX_OTLP_DOCUMENT:,} bytes is not read"
            )
            return
        try:
            documents = [(None, data)] if _is_single_document(data) else list(_lines(data))
        except ValueError as exc:
            yield ParseError(None, str(exc))
            return
        for line, document in documents:
            self.stats.lines += 1
            try:
                result = normalise(spans_from_json(document))
            except OtlpDecodeError as exc:
                self.stats.malformed_lines += 1
                yield ParseError(line, str(exc))
                continue
            for span_id, reason in result.rejected:
                self.stats.malformed_lines += 1
                yield ParseError(line, f"span {span_id}: {reason}")
            self.stats.ignored_lines += result.ignored_spans
            self.stats.calls += len(result.calls)
            yield from result.records()


def _is_single_document(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def _lines(data: bytes):
    for number, line in enumerate(data.splitlines(), start=1):
        if line.strip():
            yield number, line


RESUMABLE_FORMATS = ("claude-code", "codex")


def make_parser(fmt: str, name: str, meta: dict | None = None, state: dict | None = None):
    """A parser for one file; `state` (from a parser's `state()`) goes on where an earlier
    read of the same file stopped (claude-code and codex only)."""
    if fmt == "claude-code":
        return ClaudeCodeParser(name, meta=meta, state=state)
    if fmt == "codex":
        fallback = name.rsplit("/", 1)[-1].removesuffix(".jsonl")
        return CodexParser(name, fallback_session_id=fallback, state=state)
    if fmt == "otlp-json":
        return _OtlpFileParser(name)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
