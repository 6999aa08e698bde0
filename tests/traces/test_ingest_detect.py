"""Format detection on ingest: long, huge and deeply nested first lines, archive members,
files known by their path, and files skipped with the reason."""

import gzip
import io
import json
import tarfile
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.traces.factories import claude_session, codex_meta, codex_token_count, usage
from traces.formats.detect import DETECT_MAX_BYTES
from traces.models import Call, Session

pytestmark = pytest.mark.django_db

SUBAGENT_FIXTURE = "d-kimuson__claude-code-viewer__agent-test-hash-123.jsonl"
SESSION_ID = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
SUBAGENT_PATH = f"projects/-path-to-Demo/{SESSION_ID}/subagents/agent-test-hash-123.jsonl"
NOT_RECOGNISED = "not a recognised trace format (Claude Code, Codex or OTLP/JSON)"
NO_LAYOUT = "its path is not a Claude Code or Codex file layout"


def long_prompt(size: int) -> str:
    """A user prompt of `size` characters, like a pasted review brief."""
    paragraph = (
        "Review the module below for error handling: every call that can fail must report "
        "the file, the line and the reason, and valid input must be kept.\n"
    )
    return (paragraph * (size // len(paragraph) + 1))[:size]


def subagent_with_long_prompt(shared_fixtures) -> bytes:
    """The real subagent transcript, its first line carrying a 9.4 KB prompt."""
    first, *rest = (shared_fixtures / SUBAGENT_FIXTURE).read_bytes().splitlines(keepends=True)
    entry = json.loads(first)
    entry["message"]["content"] = long_prompt(9_400)
    return json.dumps(entry).encode() + b"\n" + b"".join(rest)


def jsonl(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def write_zip(path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def write_tgz(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("container", ["plain", "zip", "cut zip", "tar.gz", "jsonl.gz"])
def test_subagent_file_whose_first_line_is_a_long_prompt(
    ingest, tmp_path, shared_fixtures, container
):
    data = subagent_with_long_prompt(shared_fixtures)
    assert 9_400 < len(data.split(b"\n", 1)[0]) < 10_000  # past the old 8 KiB head
    if container == "plain":
        path = tmp_path / SUBAGENT_PATH
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
    elif container == "jsonl.gz":
        path = tmp_path / (SUBAGENT_PATH + ".gz")
        path.parent.mkdir(parents=True)
        path.write_bytes(gzip.compress(data))
    elif container in {"zip", "cut zip"}:
        path = tmp_path / "projects.zip"
        write_zip(path, {SUBAGENT_PATH: data})
        if container == "cut zip":  # read from the local headers, with stream-unzip
            whole = path.read_bytes()
            path.write_bytes(whole[: whole.index(b"PK\x01\x02")])
    else:
        path = tmp_path / "projects.tar.gz"
        write_tgz(path, {SUBAGENT_PATH: data})
    summary = ingest(path)
    if container == "cut zip":
        assert [e["error"][:50] for e in summary.errors] == [
            "zip archive without a readable central directory ("
        ]
    else:
        assert summary.errors == []
    assert summary.files == 1 and summary.calls == 1 and summary.malformed_lines == 0
    call = Call.objects.get()
    assert (call.session.external_id, call.agent.external_id) == (SESSION_ID, "test-hash-123")
    assert (call.input_tokens, call.output_tokens) == (100, 10)


def test_zip_members_whose_first_lines_exceed_512_bytes(ingest, tmp_path, shared_fixtures):
    real = (shared_fixtures / f"d-kimuson__claude-code-viewer__{SESSION_ID}.jsonl").read_bytes()
    claude = claude_session(4, session="long-prompt")
    first = json.loads(claude[0])
    first["message"]["content"] = long_prompt(1_500)
    claude[0] = json.dumps(first)
    meta = json.loads(codex_meta("019c0000-0000-7000-8000-0000000000c1"))
    meta["payload"]["base_instructions"] = {"text": long_prompt(2_000)}
    codex = [
        json.dumps(meta),
        codex_token_count(t=1, total=usage(1000, 200, 50), last=usage(1000, 200, 50)),
        codex_token_count(t=2, total=usage(2500, 900, 80), last=usage(1500, 700, 30)),
    ]
    members = {
        f"claude/{SESSION_ID}-copy.jsonl": real,
        "claude/long-prompt.jsonl": jsonl(claude),
        "codex/session-c1.jsonl": jsonl(codex),
    }
    assert all(len(data.split(b"\n", 1)[0]) > 512 for data in members.values())
    archive = tmp_path / "transcripts.zip"
    write_zip(archive, members)
    summary = ingest(archive)
    assert summary.errors == []
    assert summary.files == 3
    counts = dict(Session.objects.values_list("external_id", "call_count"))
    assert counts == {SESSION_ID: 20, "long-prompt": 4, "019c0000-0000-7000-8000-0000000000c1": 2}
    assert summary.calls == Call.objects.count() == 26


def test_a_50_mb_first_line_is_parsed_when_the_path_names_the_format(ingest, tmp_path):
    path = tmp_path / "projects/-work-demo/big-session/subagents/agent-big.jsonl"
    path.parent.mkdir(parents=True)
    calls = claude_session(5, session="big-session")
    with open(path, "wb") as handle:
        # A user line of 50 MB: a pasted log. Longer than what detection reads.
        handle.write(b'{"type": "user", "sessionId": "big-session", "isSidechain": true, ')
        handle.write(b'"uuid": "u-big", "timestamp": "2026-03-01T09:00:00Z", ')
        handle.write(b'"message": {"role": "user", "content": "')
        handle.write(b"x" * (50 * 1024 * 1024))
        handle.write(b'"}}\n')
        handle.write(jsonl(calls[1:]))
    assert path.stat().st_size > 50 * 1024 * 1024 > DETECT_MAX_BYTES
    summary = ingest(path)
    assert summary.errors == []
    assert summary.calls == 5 and summary.malformed_lines == 0
    assert set(Call.objects.values_list("agent__external_id", flat=True)) == {"big"}


def test_a_deeply_nested_first_line_is_reported_and_the_rest_kept(ingest, tmp_path):
    depth = 2_000  # orjson refuses more than 1,024
    nested = '{"level": ' * depth + "1" + "}" * depth
    first = (
        '{"type": "user", "sessionId": "deep", "uuid": "u-deep", "timestamp": '
        f'"2026-03-01T09:00:00Z", "toolUseResult": {nested}, '
        '"message": {"role": "user", "content": "go"}}'
    )
    assert len(first) > 8192
    path = tmp_path / "deep.jsonl"
    path.write_bytes(jsonl([first, *claude_session(3, session="deep")[1:]]))
    summary = ingest(path)
    assert summary.calls == 3 and summary.malformed_lines == 1
    assert len(summary.errors) == 1
    assert (summary.errors[0]["file"], summary.errors[0]["line"]) == ("deep.jsonl", 1)
    assert summary.errors[0]["error"].startswith("malformed JSON: depth limit exceeded")


def snapshots_then_session(session: str, snapshots: int = 120) -> bytes:
    """Claude Code's file-history snapshots (no session id, a type detection does not
    take as a format) before the conversation."""
    snapshot = json.dumps(
        {
            "type": "file-history-snapshot",
            "messageId": "m-1",
            "snapshot": {"messageId": "m-1", "trackedFileBackups": {}, "timestamp": "2026-03-01"},
            "isSnapshotUpdate": False,
        }
    )
    return jsonl([snapshot] * snapshots + claude_session(3, session=session))


def test_content_without_a_format_is_ingested_when_the_path_layout_names_it(ingest, tmp_path):
    archive = tmp_path / "home.zip"
    write_zip(
        archive,
        {
            "projects/-work-demo/3f1c2a9e-0000-4000-8000-00000000000a.jsonl": (
                snapshots_then_session("by-layout")
            ),
            "exports/by-name-only.jsonl": snapshots_then_session("no-layout"),
        },
    )
    summary = ingest(archive)
    assert summary.calls == 3 and summary.files == 1
    assert list(Session.objects.values_list("external_id", "call_count")) == [("by-layout", 3)]
    assert summary.errors == [
        {
            "file": "home.zip:exports/by-name-only.jsonl",
            "line": 1,
            "error": f"{NOT_RECOGNISED}: read lines 1–100, the most read to detect a format; "
            "line 1: a JSON object of no known format (type 'file-history-snapshot'); "
            "line 2: a JSON object of no known format (type 'file-history-snapshot'); "
            "line 3: a JSON object of no known format (type 'file-history-snapshot'); "
            f"and 97 more lines; {NO_LAYOUT}",
        }
    ]


def test_an_unrecognised_file_is_skipped_with_the_lines_looked_at(ingest, tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b'{"event": "deploy"}\nhello\n\n[1, 2]\n')
    summary = ingest(path)
    assert summary.calls == 0 and summary.files == 0
    assert summary.errors == [
        {
            "file": "notes.jsonl",
            "line": 1,
            "error": f"{NOT_RECOGNISED}: read lines 1–4 to the end of the file; "
            "line 1: a JSON object of no known format; "
            "line 2: malformed JSON: unexpected character, expected a JSON value: line 1 column 1 "
            "(char 0); "
            f"line 4: a JSON array, not an object; {NO_LAYOUT}",
        }
    ]


def test_a_first_line_over_the_bound_without_a_layout_is_skipped(ingest, tmp_path):
    path = tmp_path / "export.jsonl"
    with open(path, "wb") as handle:
        handle.write(b'{"note": "' + b"y" * (DETECT_MAX_BYTES + 10) + b'"}\n')
        handle.write(jsonl(claude_session(2, session="after-the-long-line")))
    summary = ingest(path)
    assert summary.calls == 0
    assert summary.errors == [
        {
            "file": "export.jsonl",
            "line": 1,
            "error": f"{NOT_RECOGNISED}: line 1 is longer than {DETECT_MAX_BYTES:,} bytes, "
            f"the most read to detect a format; {NO_LAYOUT}",
        }
    ]


def test_an_upload_job_reports_the_skipped_member_and_ingests_the_others(api_for, run_on_commit):
    claude = claude_session(3, session="job-long-prompt")
    first = json.loads(claude[0])
    first["message"]["content"] = long_prompt(3_000)
    claude[0] = json.dumps(first)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("team/a.jsonl", jsonl(claude))
        archive.writestr("team/b.jsonl", b"[]\n")
    api = api_for("editor")
    with run_on_commit():
        response = api.post(
            "/api/v1/trace-uploads/",
            {"files": [SimpleUploadedFile("team.zip", buffer.getvalue())]},
            format="multipart",
        )
    job = api.get(response.json()["job_url"]).json()
    assert job["status"] == "succeeded"
    assert job["counts"]["calls"] == 3
    assert job["errors"] == [
        {
            "file": "team.zip:team/b.jsonl",
            "line": 1,
            "error": f"{NOT_RECOGNISED}: read line 1 to the end of the file; "
            f"line 1: a JSON array, not an object; {NO_LAYOUT}",
        }
    ]
