"""Format detection (pure): the first record that names a format, the path layouts, the
bound, the reasons given, and the replay that hands the parser every byte."""

import gzip
import hashlib
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.formats import detect_format, make_parser
from traces.formats.detect import format_from_path

CLAUDE = b'{"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "hi"}}\n'
CODEX = b'{"type": "session_meta", "payload": {"id": "019c0000-0000-7000-8000-000000000001"}}\n'
OTLP_LINE = b'{"resourceSpans": []}\n'
OTLP_PRETTY = b'{\n  "resourceSpans": [\n    {"scopeSpans": []}\n  ]\n}\n'


def stream(data: bytes, buffer_size: int = 8192) -> io.BufferedReader:
    return io.BufferedReader(io.BytesIO(data), buffer_size=buffer_size)


def replayed_lines(detection) -> list[bytes]:
    return [bytes(line) for line in detection.replay()]


@pytest.mark.parametrize(
    ("data", "fmt", "line"),
    [
        (CLAUDE, "claude-code", 1),
        (CODEX, "codex", 1),
        (OTLP_LINE, "otlp-json", 1),
        (OTLP_PRETTY, "otlp-json", 2),
        (b"\n\n{broken\n" + CODEX, "codex", 4),
        (b'["a"]\n{"other": 1}\n' + CLAUDE, "claude-code", 3),
    ],
)
def test_the_first_record_that_names_a_format_decides(data, fmt, line):
    detection = detect_format("upload.jsonl", stream(data))
    assert (detection.format, detection.decided_by, detection.line) == (fmt, "content", line)
    assert b"".join(replayed_lines(detection)) == data


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("sessions/2026/03/01/rollout-2026-03-01T09-00-00-019c.jsonl", "codex"),
        ("rollout-2026-03-01T09-00-00-019c.jsonl", "codex"),
        ("projects/-work-demo/3f1c2a9e-0000-4000-8000-00000000000a.jsonl", "claude-code"),
        ("home/.claude/projects/-work-demo/notes.jsonl", "claude-code"),
        ("projects/-work-demo/3f1c2a9e/subagents/agent-a1b2.jsonl", "claude-code"),
        ("projects/-work-demo/agent-a1b2.jsonl", "claude-code"),
        ("agent-a1b2.jsonl", "claude-code"),
        ("3F1C2A9E-0000-4000-8000-00000000000A.jsonl", "claude-code"),
        ("C:\\Users\\me\\.claude\\projects\\demo\\s.jsonl", "claude-code"),
        ("exports/session.jsonl", None),
        ("projects/s.jsonl", None),
        ("projects/-work-demo/s.json", None),
        ("rollout-notes.txt", None),
    ],
)
def test_path_layouts(name, fmt):
    assert format_from_path(name) == fmt


def test_the_content_decides_before_the_path():
    detection = detect_format("sessions/2026/03/01/rollout-x.jsonl", stream(CLAUDE))
    assert (detection.format, detection.decided_by) == ("claude-code", "content")


def test_a_line_longer_than_the_bound_is_completed_for_the_parser():
    long_line = b'{"type": "user", "sessionId": "s1", "pad": "' + b"z" * 5000 + b'"}\n'
    data = long_line + CLAUDE
    by_path = detect_format("projects/demo/agent-a.jsonl", stream(data, 512), max_bytes=1000)
    assert (by_path.format, by_path.decided_by, by_path.line) == ("claude-code", "path", 1)
    assert replayed_lines(by_path) == [long_line, CLAUDE]
    unknown = detect_format("export.jsonl", stream(data, 512), max_bytes=1000)
    assert unknown.format is None and unknown.line == 1
    assert unknown.reason == (
        "not a recognised trace format (Claude Code, Codex or OTLP/JSON): line 1 is longer "
        "than 1,000 bytes, the most read to detect a format; its path is not a Claude Code or "
        "Codex file layout"
    )


def test_the_line_bound():
    data = b'{"other": 1}\n' * 5 + CLAUDE
    detection = detect_format("export.jsonl", stream(data), max_lines=5)
    assert detection.format is None
    assert "read lines 1–5, the most read to detect a format" in detection.reason
    assert "; and 2 more lines;" in detection.reason
    assert detect_format("export.jsonl", stream(data), max_lines=6).format == "claude-code"


@pytest.mark.parametrize("data", [b"", b"\n", b"  \n\r\n\n"])
def test_blank_files_are_empty_whatever_their_path(data):
    detection = detect_format("projects/demo/agent-a.jsonl", stream(data))
    assert detection.empty and detection.format is None
    assert detection.reason == "empty file (nothing to ingest)"


def test_a_read_error_before_any_record_is_given_back_to_the_parser():
    pad = b"".join(hashlib.sha256(bytes([i])).hexdigest().encode() for i in range(200))
    compressed = gzip.compress(b'{"type": "user", "pad": "' + pad + b'"}\n' + CLAUDE)
    cut = compressed[: len(compressed) // 2]  # cut within the first line
    by_path = detect_format("agent-a.jsonl", gzip.GzipFile(fileobj=io.BytesIO(cut)))
    assert by_path.format == "claude-code" and by_path.decided_by == "path"
    with pytest.raises(EOFError):
        replayed_lines(by_path)
    unknown = detect_format("export.jsonl", gzip.GzipFile(fileobj=io.BytesIO(cut)))
    assert unknown.format is None and unknown.line == 1
    assert "reading stopped in line 1, truncated or corrupt: Compressed file ended" in (
        unknown.reason
    )


def test_read_gives_back_every_byte():
    data = OTLP_PRETTY + b" " * 100
    detection = detect_format("trace.json", stream(data))
    assert detection.format == "otlp-json"
    replay = detection.replay()
    assert replay.read(3) + replay.read(10) + replay.read() == data


def test_the_lines_are_freed_once_the_parser_is_past_them():
    detection = detect_format("upload.jsonl", stream(b"{}\n" + CLAUDE + CODEX))
    lines = iter(detection.replay())
    assert [next(lines), next(lines)] == [b"{}\n", CLAUDE]
    assert detection._lines == []  # the replay owns them, not the detection
    assert next(lines) == CODEX


json_line = st.builds(
    lambda d: json.dumps(d).encode(),
    st.dictionaries(st.sampled_from(["type", "sessionId", "payload", "x"]), st.text(max_size=40)),
)
raw_line = st.one_of(json_line, st.binary(max_size=300), st.just(b""), st.just(b"\r"))


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(raw_line, max_size=12),
    trailing_newline=st.booleans(),
    max_lines=st.integers(1, 6),
    max_bytes=st.integers(1, 400),
    name=st.sampled_from(["agent-a.jsonl", "upload.jsonl"]),
)
def test_the_parser_sees_exactly_the_lines_of_the_stream(
    lines, trailing_newline, max_lines, max_bytes, name
):
    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    detection = detect_format(name, stream(data, 64), max_lines=max_lines, max_bytes=max_bytes)
    assert replayed_lines(detection) == list(io.BytesIO(data))


@pytest.mark.parametrize(
    ("fixture", "name"),
    [
        (
            "madshn__localpush__rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl",
            "sessions/2026/02/23/rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl",
        ),
        (
            "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
            "projects/-path-to-Demo/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        ),
    ],
)
def test_the_parsers_read_a_replay_over_the_bound_as_the_file_itself(
    shared_fixtures, fixture, name
):
    data = (shared_fixtures / fixture).read_bytes()
    detection = detect_format(name, stream(data, 64), max_bytes=100)  # within line 1
    assert detection.decided_by == "path"
    from_replay = list(make_parser(detection.format, name).parse(detection.replay()))
    from_file = list(make_parser(detection.format, name).parse(io.BytesIO(data)))
    assert len(from_file) > 10 and from_replay == from_file
