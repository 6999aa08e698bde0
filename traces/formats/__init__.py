"""Pure, streaming trace parsers. Nothing here imports Django.

`detect_format(name, head)` guesses the format of a file from its name and first bytes;
`make_parser(fmt, name, meta).parse(stream)` yields normalised records (see
`records.py`), with `ParseError`s for the lines it had to skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import orjson

from traces.formats.claude_code import ClaudeCodeParser
from traces.formats.codex import CodexParser
from traces.formats.otlp import OtlpDecodeError, normalise, spans_from_json
from traces.formats.records import ParseError, ParseStats

FORMATS = ("claude-code", "codex", "otlp-json")
MAX_OTLP_DOCUMENT = 64 * 1024 * 1024
CODEX_TYPES = {
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
    "token_usage_record",
}


def detect_format(name: str, head: bytes) -> str | None:
    """'claude-code', 'codex', 'otlp-json', or None when the content is not recognised."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    text = head.lstrip()
    if base.startswith("rollout-") and base.endswith(".jsonl"):
        return "codex"
    if b'"resourceSpans"' in text[:4096]:
        return "otlp-json"
    # Look at the first few complete lines, so one corrupt first line does not hide the format.
    for line in text.split(b"\n")[:20]:
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(entry, dict):
            continue
        if "payload" in entry and entry.get("type") in CODEX_TYPES:
            return "codex"
        if "sessionId" in entry or entry.get("type") in {"summary", "user", "assistant", "system"}:
            return "claude-code"
    return None


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
