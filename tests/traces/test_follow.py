"""`ingest_traces --follow`: files read as they grow, from the stored offset.

The counts of a file ingested append by append must be those of the whole file read once.
They are checked against the independent reference of test_differential.py (stdlib
`json`, no parser code), on generated Claude Code and Codex folders appended to at
arbitrary byte boundaries: mid-line, and between or inside the streamed lines of one
message (Claude Code writes one line per content block, all sharing `message.id`).
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management.base import OutputWrapper
from django.db import connection
from django.db.models import Sum

from governance.models import AuditEvent
from tests.traces.test_differential import (
    assert_matches,
    product_sessions,
    reference,
    transcript_files,
)
from tests.traces.transcript_shapes import write_claude_corpus, write_codex_corpus
from traces.management.commands.ingest_traces import _StatusLine
from traces.models import Call, Compaction, FollowedFile, Session
from traces.services import ingest_paths
from traces.services.follow import Follower

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[2]


# --- appends at arbitrary byte boundaries equal one whole read ----------------------------


def _streamed_cuts(data: bytes) -> list[int]:
    """Byte offsets inside a call's streamed lines: after a line of a Claude Code message
    that a later line of the same message follows, and in the middle of that later line."""
    cuts = []
    offsets = [0]
    lines = data.splitlines(keepends=True)
    for raw in lines:
        offsets.append(offsets[-1] + len(raw))
    first_seen: dict[str, int] = {}
    for index, raw in enumerate(lines):
        line = json.loads(raw)
        message = line.get("message") if isinstance(line, dict) else None
        if not isinstance(message, dict) or not message.get("id") or "usage" not in message:
            continue
        if message["id"] in first_seen:
            cuts.append(offsets[index])  # the earlier blocks are in, this one is not
            cuts.append(offsets[index] + len(raw) // 2)  # this one is half written
        else:
            first_seen[message["id"]] = index
    return cuts


def _append_plan(data: bytes, rng: random.Random) -> tuple[list[int], set[int]]:
    """Where each append of a file ends: random bytes, plus cuts inside streamed messages
    (returned too)."""
    inside = _streamed_cuts(data)
    streamed = set(rng.sample(inside, min(10, len(inside))))
    cuts = streamed | {rng.randrange(1, len(data)) for _ in range(8)}
    return [*sorted(cuts), len(data)], streamed


def _corpus(root: Path, seed: int) -> None:
    write_claude_corpus(
        root, seed=seed, sessions=5, calls_per_session=(10, 120), blocks=(1, 5),
        final_not_last=0.05, model_switch=0.05, compactions=0.04, interleave_results=0.7,
    )  # fmt: skip
    write_codex_corpus(root, seed=seed, sessions=2, calls_per_session=(10, 120), compactions=0.05)


@pytest.mark.parametrize("seed", (21, 22))
def test_appends_at_any_byte_give_the_counts_of_one_whole_read(
    workspace, other_workspace, tmp_path, seed
):
    source, followed = tmp_path / "source", tmp_path / "followed"
    _corpus(source, seed)
    followed.mkdir()
    rng = random.Random(seed)
    whole = {path: path.read_bytes() for path in transcript_files([source])}
    plans, streamed = {}, {}
    for path, data in whole.items():
        plans[path], streamed[path] = _append_plan(data, rng)
    sidecars = [p for p in source.rglob("*.meta.json")]
    for sidecar in sidecars:  # written with the subagent file's first line, as Claude Code does
        target = followed / sidecar.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(sidecar.read_bytes())
    follower = Follower(workspace=workspace, paths=[str(followed)], refresh_analytics=False)
    written = dict.fromkeys(whole, 0)
    appends = streamed_appends = 0
    while any(plans.values()):
        for path in rng.sample(sorted(plans), len(plans)):
            if not plans[path] or rng.random() < 0.4:
                continue
            end = plans[path].pop(0)
            target = followed / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as handle:
                handle.write(whole[path][written[path] : end])
            written[path] = end
            appends += 1
            streamed_appends += end in streamed[path]
        follower.poll()
    follower.poll()
    assert appends > 100 and streamed_appends > 30
    assert follower.status.summary.errors == []
    assert follower.status.resets == 0
    # Every file was read to its end, never again from its start.
    rows = {row.path: row for row in FollowedFile.objects.filter(workspace=workspace)}
    assert len(rows) == len(whole)
    for path, data in whole.items():
        row = rows[str(followed / path.relative_to(source))]
        assert (row.offset, row.lines) == (len(data), data.count(b"\n"))
    assert_matches(reference([source]), workspace)
    # And the same as the one-shot ingest of the whole files.
    ingest_paths(workspace=other_workspace, paths=[str(source)], refresh_analytics=False)
    assert _comparable(product_sessions(workspace)) == _comparable(
        product_sessions(other_workspace)
    )


def _comparable(sessions: dict) -> dict:
    return {
        key: {name: value for name, value in entry.items() if name != "id"}
        for key, entry in sessions.items()
    }


# --- the command, as it runs -----------------------------------------------------------------


def _claude_line(session: str, message: str, output: int, *, uuid: str, request="req_1") -> bytes:
    line = {
        "type": "assistant", "sessionId": session, "uuid": uuid, "parentUuid": None,
        "isSidechain": False, "version": "2.1.50", "cwd": "/work/demo", "requestId": request,
        "timestamp": "2026-03-01T10:00:00.000Z",
        "message": {
            "id": message, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": f"block of {message}"}],
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100,
                      "cache_read_input_tokens": 1000, "output_tokens": output},
        },
    }  # fmt: skip
    return json.dumps(line).encode() + b"\n"


def _boundary(session: str, uuid: str) -> bytes:
    line = {
        "type": "system", "subtype": "compact_boundary", "sessionId": session, "uuid": uuid,
        "parentUuid": None, "timestamp": "2026-03-01T10:05:00.000Z", "version": "2.1.50",
        "compactMetadata": {"trigger": "auto", "preTokens": 150000},
    }  # fmt: skip
    return json.dumps(line).encode() + b"\n"


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def _wait_for(check, what: str, timeout: float = 20.0):
    """Poll the database until `check()` is truthy (the follower runs in another process)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"the follower did not get there: {what}; last seen {value!r}")
        time.sleep(0.05)


def _start(workspace, folder: Path) -> subprocess.Popen:
    database = connection.settings_dict
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    return subprocess.Popen(
        [sys.executable, "manage.py", "ingest_traces", "--follow", str(folder), "--workspace",
         workspace.slug, "--interval", "0.1", "--no-analytics", "--status-every", "0"],
        env={**os.environ, "DATABASE_URL": url}, cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _stop(process: subprocess.Popen) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return out, err


def _calls(session: str) -> int:
    return Call.objects.filter(session__external_id=session).count()


def _output(session: str) -> int:
    return Call.objects.filter(session__external_id=session).aggregate(n=Sum("output_tokens"))["n"]


@pytest.mark.django_db(transaction=True)
def test_the_command_follows_appends_truncation_replacement_and_restarts(workspace, tmp_path):
    folder = tmp_path / "projects" / "-work-demo"
    folder.mkdir(parents=True)
    main, other = folder / "s1.jsonl", folder / "s2.jsonl"
    process = _start(workspace, tmp_path)
    try:
        # Two calls: counted after the first append.
        _append(
            main,
            _claude_line("s1", "m1", 5, uuid="u1")
            + _claude_line("s1", "m2", 7, uuid="u2", request="req_2"),
        )
        _wait_for(lambda: _calls("s1") == 2, "2 calls of s1")
        _wait_for(lambda: Session.objects.get(external_id="s1").call_count == 2, "derived totals")
        # A streamed block of m2 with the final output count: the same call, updated.
        _append(main, _claude_line("s1", "m2", 70, uuid="u3", request="req_2"))
        _wait_for(lambda: _output("s1") == 75, "m2's final output")
        assert _calls("s1") == 2
        # Half a line: not read until it is whole. A line of another file written after
        # it shows that a poll has seen it.
        third = _claude_line("s1", "m3", 9, uuid="u4", request="req_3")
        _append(main, third[:40])
        _append(other, _claude_line("s2", "n1", 3, uuid="v1"))
        _wait_for(lambda: _calls("s2") == 1, "the call of s2")
        row = FollowedFile.objects.get(path=str(main))
        assert row.offset == main.stat().st_size - 40
        assert _calls("s1") == 2
        _append(main, third[40:] + _boundary("s1", "b1"))
        _wait_for(lambda: _calls("s1") == 3, "3 calls of s1")
        _wait_for(
            lambda: Compaction.objects.filter(session__external_id="s1").count() == 1,
            "the compaction",
        )
        _wait_for(lambda: Session.objects.get(external_id="s1").call_count == 3, "derived totals")
        # Truncated to a shorter file: read again from the start, nothing counted twice.
        main.write_bytes(_claude_line("s1", "m1", 5, uuid="u1"))
        _wait_for(lambda: FollowedFile.objects.get(path=str(main)).resets == 1, "the truncation")
        assert (_calls("s1"), _output("s1")) == (3, 84)
        _append(main, _claude_line("s1", "m4", 1, uuid="u5", request="req_4"))
        _wait_for(lambda: _calls("s1") == 4, "the call appended after the truncation")
        # Replaced by another file of the same length (a rename over it): read again.
        replacement = folder / "s1.tmp"
        replacement.write_bytes(
            _claude_line("s1", "m1", 5, uuid="u1").replace(b'"m1"', b'"m5"')
            + _claude_line("s1", "m4", 1, uuid="u5", request="req_4")
        )
        replacement.rename(main)
        _wait_for(lambda: FollowedFile.objects.get(path=str(main)).resets == 2, "the replacement")
        _wait_for(lambda: _calls("s1") == 5, "the replaced file's new call")
    finally:
        out, _ = _stop(process)
    assert "following 2 files" in out.splitlines()[-1]
    assert "2 files re-read" in out.splitlines()[-1]
    run = AuditEvent.objects.get(workspace=workspace, action="trace_ingest.follow")
    assert (run.data["followed_files"], run.data["calls"], run.data["resets"]) == (2, 6, 2)

    # Stopped: lines written meanwhile (and half a line) are read after a restart, from
    # the stored offset: the file's earlier lines are not read again.
    before = FollowedFile.objects.get(path=str(main))
    late = _claude_line("s1", "m6", 4, uuid="u6", request="req_6")
    _append(main, _claude_line("s1", "m7", 2, uuid="u7", request="req_7") + late[:25])
    process = _start(workspace, tmp_path)
    try:
        _wait_for(lambda: _calls("s1") == 6, "the call written while stopped")
        _append(main, late[25:])
        _wait_for(lambda: _calls("s1") == 7, "the half line completed after the restart")
    finally:
        out, _ = _stop(process)
    after = FollowedFile.objects.get(path=str(main))
    assert after.lines == before.lines + 2
    assert after.offset == main.stat().st_size
    assert after.resets == before.resets
    assert "0 files re-read" in out.splitlines()[-1]


def test_a_folder_ingested_once_is_followed_on_from_that_read(workspace, tmp_path):
    """`ingest_traces PATH` first, then `--follow PATH`: each file goes on from where the
    one-shot read stopped (its stored offset and parser state), not from its start."""
    source, followed = tmp_path / "source", tmp_path / "followed"
    _corpus(source, 23)
    rng = random.Random(23)
    whole = {path: path.read_bytes() for path in transcript_files([source])}
    cut = {}
    for path, data in whole.items():
        cut[path] = rng.choice(_streamed_cuts(data) or [len(data) // 2])
        target = followed / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data[: cut[path]])
    ingest_paths(workspace=workspace, paths=[str(followed)], refresh_analytics=False)
    follower = Follower(workspace=workspace, paths=[str(followed)], refresh_analytics=False)
    assert follower.poll() == 0  # nothing new since the one-shot read
    for path, data in whole.items():
        (followed / path.relative_to(source)).write_bytes(data)
    follower.poll()
    assert follower.status.summary.errors == []
    # Only the lines after each one-shot read were parsed.
    read_before = sum(data[: cut[path]].count(b"\n") for path, data in whole.items())
    assert follower.status.lines == sum(d.count(b"\n") for d in whole.values()) - read_before
    assert_matches(reference([source]), workspace)


def test_a_file_of_no_followed_format_is_reported_once_and_left_alone(workspace, tmp_path):
    otlp = tmp_path / "spans.jsonl"
    otlp.write_text('{"resourceSpans": []}\n')
    follower = Follower(workspace=workspace, paths=[str(tmp_path)], refresh_analytics=False)
    follower.poll()
    _append(otlp, b'{"resourceSpans": []}\n')
    follower.poll()
    errors = follower.status.summary.errors
    assert [(e["file"], e["error"]) for e in errors] == [
        (str(otlp), "otlp-json files are not followed (only Claude Code and Codex transcripts)")
    ]
    assert FollowedFile.objects.get(path=str(otlp)).offset == 0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_status_line_is_rewritten_on_a_terminal_and_printed_elsewhere():
    terminal = _Terminal()
    status = _StatusLine(OutputWrapper(terminal), OutputWrapper(io.StringIO()), every=30)
    status.show("following 1 files · 1 reads")
    status.show("following 1 files · 2 reads")
    status.show("following 1 files · 2 reads", final=True)
    assert terminal.getvalue() == (
        "\r\x1b[Kfollowing 1 files · 1 reads\r\x1b[Kfollowing 1 files · 2 reads"
        "\r\x1b[Kfollowing 1 files · 2 reads\n"
    )
    log = io.StringIO()
    status = _StatusLine(OutputWrapper(log), OutputWrapper(io.StringIO()), every=3600)
    status.show("following 1 files · 1 reads")
    status.show("following 1 files · 2 reads")  # within the period: not printed
    status.show("following 1 files · 2 reads", final=True)
    assert log.getvalue() == "following 1 files · 1 reads\nfollowing 1 files · 2 reads\n"
