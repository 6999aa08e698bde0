"""Ingestion into the database: counts, idempotency, growth, concurrency, interrupted work, bad input."""

import gc
import gzip
import io
import json
import tarfile
import threading
import zipfile

import pytest
from django.core.files import File
from django.db import connections

from tests.traces.factories import (
    claude_assistant,
    claude_boundary,
    claude_session,
    claude_user,
    write_lines,
)
from traces.formats.claude_code import ClaudeCodeParser
from traces.ingest import IngestSummary, TraceLoader, decompress_text
from traces.models import (
    Agent,
    Call,
    CallText,
    Compaction,
    FileTouch,
    IngestedFile,
    RawUpload,
    Run,
    Session,
)

pytestmark = pytest.mark.django_db


def test_all_real_fixtures(ingest, shared_fixtures, workspace):
    summary = ingest(shared_fixtures)
    assert summary.errors == []
    assert summary.as_dict()["files"] == 14
    assert summary.calls == Call.objects.count() == 693  # 206 Claude + 487 Codex calls
    assert summary.sessions == Session.objects.count() == 12
    assert summary.compactions == Compaction.objects.count() == 2
    session = Session.objects.get(external_id="fe5e1c67-53e7-4862-81ae-d0e013e3270b")
    assert (session.call_count, session.agent_count, session.title) == (
        170,
        6,
        "Empty Repo Setup: CLAUDE.md Foundation Created",
    )
    # The streaming hazard: 262 lines but 170 calls; totals come from the kept lines.
    assert session.output_tokens == sum(
        Call.objects.filter(session=session).values_list("output_tokens", flat=True)
    )
    subagents = Agent.objects.filter(session=session, kind="subagent")
    assert subagents.count() == 5 and set(subagents.values_list("start_kind", flat=True)) == {
        "fresh"
    }
    assert all(a.initial_context and a.initial_context < 20_000 for a in subagents)
    # Every call keeps its text, compressed.
    assert CallText.objects.count() == 693
    task_call = Call.objects.get(
        session=session,
        tool_names__contains="Task",
        agent__kind="main",
        session_index=Call.objects.filter(session=session, tool_names__contains="Task")
        .order_by("session_index")
        .values("session_index")[:1],
    )
    text = decompress_text(task_call.text.data)
    assert next(b["name"] for b in text["blocks"] if b["type"] == "tool_use") == "Task"
    codex = Session.objects.get(external_id="019c8a59-e9dd-71f0-9ae3-4079fe9726a9")
    compaction = Compaction.objects.get(session=codex)
    assert (compaction.pre_tokens, compaction.post_tokens) == (209950, 48297)
    assert compaction.after_call_index == compaction.before_call_index + 1
    runs = list(Run.objects.filter(session=codex).order_by("index"))
    assert [r.call_count for r in runs] == [184, 102] and runs[1].started_by_id == compaction.pk
    assert sum(r.call_count for r in Run.objects.filter(session=session)) == 170


def test_same_bytes_twice_add_nothing(ingest, shared_fixtures):
    first = ingest(
        shared_fixtures
        / "d-kimuson__claude-code-viewer__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
    )
    assert first.calls == 7
    second = ingest(
        shared_fixtures
        / "d-kimuson__claude-code-viewer__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
    )
    assert (second.calls, second.files, second.skipped_files) == (0, 0, 1)
    assert (
        Call.objects.count() == 7
        and RawUpload.objects.count() == 1
        and IngestedFile.objects.count() == 1
    )


def test_a_chunk_of_files_stores_each_distinct_content_once(ingest, workspace, tmp_path, settings):
    from traces.services import raw_upload_store

    lines = claude_session(5, session="sess-raw")
    write_lines(tmp_path / "a.jsonl", lines)
    write_lines(tmp_path / "b.jsonl", lines)  # the same bytes under another name
    write_lines(tmp_path / "c.jsonl", claude_session(3, session="sess-raw-c"))
    write_lines(tmp_path / "d.jsonl", claude_session(4, session="sess-raw-d"))
    earlier, created = raw_upload_store(
        workspace=workspace,
        name="d-uploaded-earlier.jsonl",
        chunks=[(tmp_path / "d.jsonl").read_bytes()],
        source="upload",
    )
    assert created
    summary = ingest(tmp_path)
    assert (summary.files, summary.skipped_files, summary.calls) == (3, 1, 12)
    by_name = dict(RawUpload.objects.values_list("original_name", "sha256"))
    assert sorted(by_name) == ["a.jsonl", "c.jsonl", "d-uploaded-earlier.jsonl"]
    assert IngestedFile.objects.get(sha256=earlier.sha256).upload_id == earlier.pk
    for upload in RawUpload.objects.all():
        assert (
            upload.file.read()
            == (tmp_path / upload.original_name.replace("-uploaded-earlier", "")).read_bytes()
        )
    assert list((settings.MEDIA_ROOT / "tmp").iterdir()) == []  # no temp file left behind


def test_a_concurrent_store_of_the_same_bytes_keeps_the_first_row_and_file(workspace):
    from traces.services import _save_or_existing, _spool, raw_upload_store

    first, _ = raw_upload_store(workspace=workspace, name="x.jsonl", chunks=[b"{}\n"], source="cli")
    spooled = _spool("y.jsonl", [b"{}\n"], durable=False)
    late = RawUpload(
        workspace=workspace,
        sha256=spooled.sha256,
        original_name="y.jsonl",
        size=spooled.size,
        source="cli",
    )
    with open(spooled.temp_path, "rb") as handle:
        late.file.save("late-copy", File(handle), save=False)
    late_name = late.file.name
    assert late_name != first.file.name  # the storage gave the second copy its own name
    assert _save_or_existing(late).pk == first.pk
    assert not first.file.storage.exists(late_name)  # the loser's copy is removed
    assert first.file.storage.exists(first.file.name) and RawUpload.objects.count() == 1


def test_the_cyclic_collector_is_paused_for_a_load_and_restored(ingest, tmp_path, monkeypatch):
    write_lines(tmp_path / "s.jsonl", claude_session(6, session="sess-gc"))
    states = []
    flush = TraceLoader.flush

    def observed_flush(self):
        states.append(gc.isenabled())
        return flush(self)

    monkeypatch.setattr(TraceLoader, "flush", observed_flush)
    assert gc.isenabled()
    assert ingest(tmp_path / "s.jsonl").calls == 6
    assert states and not any(states)
    assert gc.isenabled()
    (tmp_path / "bad.jsonl").write_bytes(b"\x00" * 10)  # a load that ends in an error
    assert ingest(tmp_path / "bad.jsonl").errors
    assert gc.isenabled()


def test_a_grown_transcript_adds_only_its_new_calls(ingest, tmp_path):
    path = tmp_path / "sess-1.jsonl"
    lines = claude_session(40)
    write_lines(path, lines[: 1 + 20 * 3])  # 20 calls, each 2 assistant lines + 1 result
    assert ingest(path).calls == 20
    write_lines(path, lines)
    grown = ingest(path)
    assert grown.calls == 20 and Call.objects.count() == 40
    indexes = list(
        Call.objects.order_by("session_index").values_list("session_index", "output_tokens")
    )
    assert indexes == [(i, 50 + i) for i in range(40)]
    assert Session.objects.get().call_count == 40
    # Only the appended lines are read: each new call's placeholder line is the duplicate.
    assert grown.duplicates_dropped == 20
    first, second = IngestedFile.objects.order_by("pk")
    assert (second.grown_from, second.start_offset) == (first, first.size)
    assert second.lines == 20 * 3 and second.calls == 20


def test_calls_already_stored_from_another_file_are_counted_as_duplicates(ingest, tmp_path):
    lines = claude_session(10, session="sess-dup")
    (tmp_path / "copy").mkdir()
    (tmp_path / "both").mkdir()
    write_lines(tmp_path / "first.jsonl", lines)
    write_lines(
        tmp_path / "copy" / "resumed.jsonl",
        [*lines, claude_assistant("m-new", "r-new", t=99, session="sess-dup")],
    )
    first = ingest(tmp_path / "first.jsonl")
    assert (first.calls, first.duplicates_dropped) == (10, 10)  # one streamed re-emit per call
    second = ingest(tmp_path / "copy" / "resumed.jsonl")
    assert (second.calls, second.duplicates_dropped) == (1, 10 + 10)
    both = tmp_path / "both"
    write_lines(both / "a.jsonl", claude_session(4, session="sess-two"))
    write_lines(both / "b.jsonl", [*claude_session(4, session="sess-two")[:-1], "{}"])
    together = ingest(both)  # the same calls in two files of one load
    assert together.calls == 4 and together.duplicates_dropped == 4 + 4 + 4


def test_a_later_line_with_more_output_updates_the_stored_call(ingest, tmp_path):
    path = tmp_path / "a.jsonl"
    write_lines(path, [claude_assistant("m1", "r1", out=1)])
    ingest(path)
    write_lines(path, [claude_assistant("m1", "r1", out=1), claude_assistant("m1", "r1", out=77)])
    summary = ingest(path)
    assert summary.calls == 0 and Call.objects.get().output_tokens == 77


def test_interrupted_file_leaves_no_half_state_and_a_retry_finishes(workspace, tmp_path):
    lines = claude_session(200)
    data = ("\n".join(lines) + "\n").encode()

    class Killed(Exception):
        pass

    def interrupted():
        for number, line in enumerate(io.BytesIO(data), start=1):
            if number == 400:
                raise Killed
            yield line

    summary = IngestSummary()
    loader = TraceLoader(workspace=workspace, summary=summary, file_name="sess.jsonl", batch_size=7)
    with pytest.raises(Killed):
        for record in ClaudeCodeParser("sess.jsonl").parse(interrupted()):
            loader.feed(record)
    partial = Call.objects.count()
    assert 0 < partial < 200 and partial % 7 == 0  # only whole batches were committed
    assert CallText.objects.count() == partial  # each batch's calls and texts commit together
    retry = TraceLoader(
        workspace=workspace, summary=IngestSummary(), file_name="sess.jsonl", batch_size=7
    )
    for record in ClaudeCodeParser("sess.jsonl").parse(io.BytesIO(data)):
        retry.feed(record)
    retry.finish()
    assert Call.objects.count() == 200 and retry.summary.calls == 200 - partial


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_workers_on_the_same_file_create_no_duplicates(workspace, tmp_path):
    path = tmp_path / "sess-c.jsonl"
    write_lines(path, claude_session(200, session="sess-c"))
    from traces.services import ingest_paths

    errors = []

    def work():
        try:
            ingest_paths(workspace=workspace, paths=[str(path)])
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (
        Call.objects.count() == 200
        and Session.objects.count() == 1
        and CallText.objects.count() == 200
    )
    assert Session.objects.get().call_count == 200
    assert RawUpload.objects.count() == 1


def test_subagent_files_join_their_session(ingest, tmp_path):
    root = tmp_path / "projects" / "-work-project"
    (root / "sess-1" / "subagents").mkdir(parents=True)
    write_lines(root / "sess-1.jsonl", claude_session(5))
    write_lines(
        root / "sess-1" / "subagents" / "agent-abc.jsonl",
        [
            claude_assistant("s1", "rs1", t=15, cr=9000, sidechain=True, agentId="abc"),
            claude_assistant("s2", "rs2", t=16, cr=11000, sidechain=True, agentId="abc"),
        ],
    )
    (root / "sess-1" / "subagents" / "agent-abc.meta.json").write_text(
        '{"agentType": "Explore", "description": "Survey the API", "toolUseId": "toolu_sess-1_1"}'
    )
    summary = ingest(tmp_path / "projects")
    assert summary.calls == 7 and summary.sessions == 1
    agent = Agent.objects.get(external_id="abc")
    assert (
        agent.kind,
        agent.description,
        agent.agent_type,
        agent.call_count,
        agent.parent.external_id,
    ) == ("subagent", "Survey the API", "Explore", 2, "main")
    assert agent.start_kind == "fresh"  # 9k against a parent already at ~21k
    session = Session.objects.get()
    assert (
        list(
            Call.objects.filter(session=session)
            .order_by("session_index")
            .values_list("agent__external_id", flat=True)
        ).count("abc")
        == 2
    )


def test_forked_subagent_is_flagged(ingest, tmp_path):
    main = [claude_assistant(f"m{i}", f"r{i}", t=i, cr=100_000 + 10_000 * i) for i in range(5)]
    fork = [
        claude_assistant("f1", "rf1", t=10, cr=139_000, sidechain=True, agentId="forky"),
        claude_assistant("f2", "rf2", t=11, cr=150_000, sidechain=True, agentId="forky"),
    ]
    write_lines(tmp_path / "sess-1.jsonl", main + fork)
    ingest(tmp_path / "sess-1.jsonl")
    assert Agent.objects.get(external_id="forky").start_kind == "fork"


def test_compaction_post_tokens_come_from_the_next_call(ingest, tmp_path):
    lines = [
        claude_assistant("m1", "r1", t=1, cr=180_000),
        claude_boundary(t=2, pre=180_205),
        claude_user("summary " * 100, t=3, isCompactSummary=True),
        claude_assistant("m2", "r2", t=4, inp=3, cc=20_000, cr=12_000),
        claude_assistant(
            "m3",
            "r3",
            t=5,
            cr=40_000,
            content=[
                {"type": "tool_use", "id": "t", "name": "Edit", "input": {"file_path": "/a.py"}}
            ],
        ),
    ]
    write_lines(tmp_path / "sess-1.jsonl", lines)
    ingest(tmp_path / "sess-1.jsonl")
    compaction = Compaction.objects.get()
    assert (
        compaction.pre_tokens,
        compaction.post_tokens,
        compaction.before_call_index,
        compaction.after_call_index,
    ) == (180_205, 32_003, 0, 1)
    runs = list(
        Run.objects.order_by("index").values_list(
            "index", "first_call_index", "call_count", "max_context"
        )
    )
    assert runs == [(0, 0, 1, 180_105), (1, 1, 2, 40_105)]
    touch = FileTouch.objects.get()
    assert (touch.path, touch.mode, touch.run_index, touch.call_index) == ("/a.py", "edit", 1, 2)


def test_archives_and_gzip_are_unpacked(ingest, tmp_path, shared_fixtures):
    archive = tmp_path / "claude-projects.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(
            shared_fixtures
            / "d-kimuson__claude-code-viewer__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
            "proj/1af7fc5e.jsonl",
        )
        z.writestr("proj/notes.txt", "ignored")
    gz = tmp_path / "rollout-2026-03-01T09-00-00-019c0000-0000-7000-8000-0000000000aa.jsonl.gz"
    gz.write_bytes(
        gzip.compress(
            (shared_fixtures / "ryoppippi__ccusage__codex-session-alpha.jsonl").read_bytes()
        )
    )
    summary = ingest(archive, gz)
    assert summary.calls == 9 and summary.files == 2 and summary.errors == []


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"", "empty file"),
        (bytes(range(256)) * 40, "not a recognised trace format"),
        (b"hello, this is a text file\nnot json at all\n", "not a recognised trace format"),
    ],
)
def test_files_that_are_not_traces_are_reported(ingest, tmp_path, content, error):
    path = tmp_path / "thing.jsonl"
    path.write_bytes(content)
    summary = ingest(path)
    assert summary.calls == 0
    assert len(summary.errors) == 1 and error in summary.errors[0]["error"]
    assert summary.errors[0]["file"] == "thing.jsonl"
    assert RawUpload.objects.count() == 1  # the raw input is kept as evidence


def test_malformed_lines_are_reported_and_valid_lines_kept(ingest, tmp_path):
    lines = claude_session(3)
    lines.insert(2, "{broken")
    lines.insert(
        5,
        '{"type": "assistant", "sessionId": "sess-1", "timestamp": "2026-03-01T09:00:00Z", "message": {"id": "x", "usage": {"input_tokens": -1}}}',
    )
    path = tmp_path / "sess-1.jsonl"
    write_lines(path, lines)
    summary = ingest(path)
    assert summary.calls == 3 and summary.malformed_lines == 2
    assert [(e["file"], e["line"]) for e in summary.errors] == [
        ("sess-1.jsonl", 3),
        ("sess-1.jsonl", 6),
    ]
    assert "malformed JSON" in summary.errors[0]["error"]
    assert "message.usage.input_tokens" in summary.errors[1]["error"]


def test_counts_too_large_for_the_database_are_reported_and_the_rest_kept(ingest, tmp_path):
    huge = 2**63  # still an integer to orjson, but past PostgreSQL's bigint
    lines = claude_session(3)
    lines.append(claude_assistant("msg-huge", "req-huge", t=500, out=huge))
    lines.append(claude_boundary(t=600, pre=huge, uuid="cb-huge"))
    lines.append(claude_assistant("msg-after", "req-after", t=700, cr=5000))
    path = tmp_path / "sess-1.jsonl"
    write_lines(path, lines)
    summary = ingest(path)
    assert summary.calls == 4 and summary.malformed_lines == 2
    errors = [(e["line"], e["error"]) for e in summary.errors]
    assert errors[0][0] == len(lines) - 2 and errors[1][0] == len(lines) - 1
    assert f"output_tokens = {huge}: not a plausible count" in errors[0][1]
    assert "call skipped" in errors[0][1]
    assert f"pre_tokens = {huge}" in errors[1][1] and "value dropped" in errors[1][1]
    assert not Call.objects.filter(key__startswith="msg-huge").exists()
    compaction = Compaction.objects.get()  # kept; the derive step fills in what was dropped
    before = Call.objects.filter(timestamp__lt=compaction.timestamp).order_by("timestamp").last()
    assert compaction.pre_tokens == before.context_tokens
    assert compaction.post_tokens == 5 + 100 + 5000  # the next call's context


def test_strings_postgresql_cannot_store_are_made_storable(ingest, tmp_path):
    nul_read = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/x/a\x00b"}}
    odd_read = {"type": "tool_use", "id": "t2", "name": "Read",
                "input": {"file_path": "/x/line\nedit\tfake"}}  # fmt: skip
    long_a, long_b = "msg_" + "a" * 400 + "1", "msg_" + "a" * 400 + "2"  # same first 300
    lines = claude_session(2, session="s-\x00-nul")
    lines += [
        claude_assistant(long_a, None, t=100, session="s-\x00-nul"),
        claude_assistant(long_b, None, t=101, session="s-\x00-nul"),
        claude_assistant("m-nul", "r1", t=102, session="s-\x00-nul", model="claude\x00x",
                         content=[nul_read, odd_read]),
    ]  # fmt: skip
    path = tmp_path / "odd.jsonl"
    write_lines(path, lines)
    summary = ingest(path)
    assert summary.errors == [] and summary.calls == 5
    session = Session.objects.get()
    assert session.external_id == "s-\ufffd-nul" and session.call_count == 5
    keys = list(Call.objects.filter(key__startswith="msg_aaa").values_list("key", flat=True))
    assert len(keys) == 2 and all(len(key) <= 300 for key in keys) and keys[0] != keys[1]
    call = Call.objects.get(key="m-nul:r1")
    assert call.model == "claude\ufffdx"
    assert sorted(FileTouch.objects.filter(path__startswith="/x/").values_list("mode", "path")) == [
        ("read", "/x/a\ufffdb"),
        ("read", "/x/line edit fake"),
    ]
    again = ingest(path)  # the same bytes: nothing new, and no duplicate for the long keys
    assert again.calls == 0 and Call.objects.count() == 5


def test_long_session_ids_sharing_a_prefix_stay_two_sessions(ingest, tmp_path):
    first, second = "s" * 250 + "-1", "s" * 250 + "-2"
    write_lines(tmp_path / "a.jsonl", claude_session(2, session=first))
    write_lines(tmp_path / "b.jsonl", claude_session(3, session=second))
    summary = ingest(tmp_path)
    assert summary.errors == [] and summary.sessions == 2
    stored = list(Session.objects.values_list("external_id", "call_count"))
    assert sorted(count for _, count in stored) == [2, 3]
    assert all(len(external) <= 200 and external.startswith("s" * 100) for external, _ in stored)


def _session_bytes(calls: int, session: str) -> bytes:
    return ("\n".join(claude_session(calls, session=session)) + "\n").encode()


@pytest.mark.parametrize("kind", ["tar.gz", "tar", "zip"])
def test_a_truncated_archive_keeps_every_call_before_the_cut(ingest, tmp_path, kind):
    whole, cut = _session_bytes(8, "sess-whole"), _session_bytes(400, "sess-cut")
    archive = tmp_path / f"projects.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("p/whole.jsonl", whole)
            z.writestr("p/cut.jsonl", cut)
    else:
        with tarfile.open(archive, "w:gz" if kind == "tar.gz" else "w") as tar:
            for name, data in (("p/whole.jsonl", whole), ("p/cut.jsonl", cut)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) * 3 // 4])
    summary = ingest(archive)
    assert Session.objects.get(external_id="sess-whole").call_count == 8
    kept = Call.objects.filter(session__external_id="sess-cut").count()
    assert summary.calls == 8 + kept and 0 < kept < 400
    files = {error["file"] for error in summary.errors}
    assert files <= {f"projects.{kind}", f"projects.{kind}:p/cut.jsonl"} and files
    assert all(
        "truncated" in e["error"] or "central directory" in e["error"] for e in summary.errors
    )


def test_a_truncated_gzip_keeps_every_call_before_the_cut(ingest, tmp_path):
    compressed = gzip.compress(_session_bytes(400, "sess-gz"))
    path = tmp_path / "sess-gz.jsonl.gz"
    path.write_bytes(compressed[: len(compressed) // 2])
    summary = ingest(path)
    kept = Call.objects.filter(session__external_id="sess-gz").count()
    assert summary.calls == kept and 0 < kept < 400
    (error,) = [e for e in summary.errors if "stopped reading" in e["error"]]
    assert error["file"] == "sess-gz.jsonl" and error["line"] > 0
    assert f"after line {error['line']:,}" in error["error"]
    assert "records before it are kept" in error["error"]
    assert RawUpload.objects.get().size == len(compressed) // 2  # the damaged bytes are kept


def test_a_zip_that_is_not_a_zip_at_all_is_a_clear_error(ingest, tmp_path):
    path = tmp_path / "junk.zip"
    path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    summary = ingest(path)
    assert summary.calls == 0
    assert summary.errors and summary.errors[0]["file"] == "junk.zip"
    assert "central directory" in summary.errors[0]["error"]


def test_workspaces_are_isolated(ingest, shared_fixtures, workspace, other_workspace):
    fixture = shared_fixtures / "ryoppippi__ccusage__claude-project-alpha-chat.jsonl"
    ingest(fixture)
    summary = ingest(fixture, target=other_workspace)
    assert summary.calls == 3  # the same bytes are new to the other workspace
    assert (
        Session.objects.filter(workspace=workspace).count()
        == Session.objects.filter(workspace=other_workspace).count()
        == 1
    )
    assert Call.objects.filter(workspace=other_workspace, session__workspace=workspace).count() == 0


def test_pending_derivation_clears_marks_and_derives(workspace, tmp_path, ingest):
    from traces.services import derive_pending_run

    write_lines(tmp_path / "s.jsonl", claude_session(6))
    ingest(tmp_path / "s.jsonl")
    session = Session.objects.get()
    Run.objects.all().delete()
    Session.objects.filter(pk=session.pk).update(needs_derive=True, call_count=0)
    assert derive_pending_run(workspace_id=workspace.pk) == 1
    session.refresh_from_db()
    assert (session.needs_derive, session.call_count, Run.objects.count()) == (False, 6, 1)
    assert derive_pending_run(workspace_id=workspace.pk) == 0


def _otlp_body(*spans: tuple[str, str, int]) -> bytes:
    """OTLP/JSON with one LLM span per (trace id, span id, input tokens): a session per trace."""
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{
        "scope": {"name": "s"},
        "spans": [{
            "traceId": trace, "spanId": span, "name": "chat", "startTimeUnixNano": str(1_767_225_600_000_000_000 + n * 10**9),
            "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(tokens)}}],
        } for n, (trace, span, tokens) in enumerate(spans)],
    }]}]}).encode()  # fmt: skip


def test_otlp_marks_new_and_existing_sessions_for_the_derive_step(workspace, members):
    from traces.services import otlp_receive

    first, second = "5B8EFFF798038103D269B633813FC60C", "5B8EFFF798038103D269B633813FC60D"
    # Not a transactional test: the on-commit derive never runs, so the marks stay visible.
    otlp_receive(workspace=workspace, user=members["editor"], content_type="application/json",
                 body=_otlp_body((first, "EEE19B7EC3C1B174", 900), (second, "EEE19B7EC3C1B175", 500)))  # fmt: skip
    assert sorted(Session.objects.values_list("needs_derive", flat=True)) == [True, True]
    Session.objects.update(needs_derive=False)  # as after the derive step
    otlp_receive(workspace=workspace, user=members["editor"], content_type="application/json",
                 body=_otlp_body((first, "EEE19B7EC3C1B176", 1200)))  # fmt: skip
    marks = dict(Session.objects.values_list("external_id", "needs_derive"))
    assert marks == {first.lower(): True, second.lower(): False}
    assert Call.objects.count() == 3


def test_otlp_conversation_ids_postgresql_cannot_store_name_one_session(workspace, members):
    from traces.services import otlp_receive

    conversation = "c\x00" + "x" * 300  # a NUL, and longer than the column

    def body(span_id: str, tokens: int) -> bytes:
        return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{
            "scope": {"name": "s"},
            "spans": [{
                "traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": span_id, "name": "chat",
                "startTimeUnixNano": str(1_767_225_600_000_000_000 + tokens),
                "attributes": [
                    {"key": "gen_ai.conversation.id", "value": {"stringValue": conversation}},
                    {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(tokens)}},
                ],
            }],
        }]}]}).encode()  # fmt: skip

    for span_id, tokens in (("EEE19B7EC3C1B174", 900), ("EEE19B7EC3C1B175", 1200)):
        otlp_receive(workspace=workspace, user=members["editor"], body=body(span_id, tokens),
                     content_type="application/json")  # fmt: skip
    session = Session.objects.get()
    assert len(session.external_id) <= 200 and session.external_id.startswith("c\ufffdxxx")
    assert sorted(Call.objects.values_list("context_tokens", flat=True)) == [900, 1200]
