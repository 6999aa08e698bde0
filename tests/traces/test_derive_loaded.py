"""Sessions a loader created are derived from the rows it wrote; the result must equal
deriving them from the database, whatever the order files arrive in."""

import pytest

from tests.traces.factories import claude_assistant, claude_session, write_lines
from traces.ingest import loader as ingest_loader
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
from traces.services import sessions_derive
from traces.synthetic import CorpusParams, generate_session

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def derived_state() -> dict:
    """Everything the derive step writes, keyed by natural keys (not ids)."""
    return {
        "sessions": sorted(
            Session.objects.values_list(
                "external_id", "agent_count", "call_count", "compaction_count", "input_tokens",
                "cache_creation_tokens", "cache_read_tokens", "output_tokens", "max_context",
                "started_at", "ended_at", "model_names",
            )
        ),
        "agents": sorted(
            Agent.objects.values_list(
                "session__external_id", "external_id", "call_count", "max_context",
                "total_tokens", "initial_context", "started_at", "ended_at", "start_kind",
            )
        ),
        "calls": sorted(
            Call.objects.values_list("session__external_id", "key", "session_index", "agent_index")
        ),
        "runs": sorted(
            Run.objects.values_list(
                "session__external_id", "agent__external_id", "index", "first_call_index",
                "last_call_index", "call_count", "max_context", "median_context", "task_type",
                "task_type_reason", "started_at", "ended_at",
            )
        ),
        "compactions": sorted(
            Compaction.objects.values_list(
                "session__external_id", "key", "before_call_index", "after_call_index",
                "pre_tokens", "post_tokens",
            )
        ),
        "touches": sorted(
            FileTouch.objects.values_list(
                "session__external_id", "agent__external_id", "run_index", "call_index", "path",
                "mode", "token_position",
            )
        ),
    }  # fmt: skip


def write_corpus(folder, sessions=4):
    params = CorpusParams(sessions=sessions, steps_per_session=(150, 260), seed=11)
    for index in range(sessions):
        generated = generate_session(index, params)
        (folder / f"{generated.session_id}.jsonl").write_bytes(b"\n".join(generated.lines) + b"\n")


def test_loaded_derivation_equals_deriving_from_the_database(ingest, tmp_path):
    write_corpus(tmp_path)
    summary = ingest(tmp_path)
    assert len(summary.derived_sessions) == 4  # every session took the in-loader path
    assert Compaction.objects.exists() and Run.objects.filter(index__gt=0).exists()
    assert Agent.objects.filter(kind="subagent").exists() and FileTouch.objects.exists()
    loaded = derived_state()
    assert loaded["runs"] and loaded["touches"]
    sessions_derive(session_ids=Session.objects.values_list("id", flat=True))
    assert derived_state() == loaded


def test_sessions_derived_in_groups_match_whatever_state_each_was_in(ingest, tmp_path, monkeypatch):
    from django.db.models import F

    from traces import derive

    write_corpus(tmp_path, sessions=5)
    ingest(tmp_path)
    expected = derived_state()
    sessions = list(Session.objects.order_by("id"))
    kept_runs = set(Run.objects.filter(session=sessions[0]).values_list("id", flat=True))
    # Never derived: no runs, no touches, zeroed totals.
    for session in sessions[1:3]:
        Run.objects.filter(session=session).delete()
        FileTouch.objects.filter(session=session).delete()
    Session.objects.filter(pk__in=[s.pk for s in sessions[1:3]]).update(call_count=0, max_context=0)
    # Positions out of order, as after a late file: the re-index must put them back.
    Call.objects.filter(session=sessions[3]).update(
        session_index=F("session_index") + 100_000, agent_index=F("agent_index") + 100_000
    )
    monkeypatch.setattr(derive, "DERIVE_GROUP", 2)  # three groups of up to two sessions
    sessions_derive(session_ids=[s.pk for s in sessions])
    assert derived_state() == expected
    # A session derived before keeps its run ids: specifications and annotations link to them.
    assert set(Run.objects.filter(session=sessions[0]).values_list("id", flat=True)) == kept_runs


def test_a_session_in_two_files_is_derived_from_the_database_in_either_order(ingest, tmp_path):
    main = tmp_path / "a" / "sess-1.jsonl"
    sub = tmp_path / "a" / "sess-1" / "subagents" / "agent-abc.jsonl"
    sub.parent.mkdir(parents=True)
    write_lines(main, claude_session(30))
    write_lines(
        sub,
        [
            claude_assistant(
                f"s{i}", f"rs{i}", t=40 + i, cr=9000 + 800 * i, sidechain=True, agentId="abc"
            )
            for i in range(6)
        ],
    )
    states = []
    for first, second in ((main, sub), (sub, main)):
        Session.objects.all().delete()
        IngestedFile.objects.all().delete()  # forget the files, so that they are read again
        RawUpload.objects.all().delete()
        ingest(first)
        ingest(second)
        assert Session.objects.get().call_count == 36
        assert Agent.objects.get(external_id="abc").call_count == 6
        states.append(derived_state())
    assert states[0] == states[1]
    sessions_derive(session_ids=Session.objects.values_list("id", flat=True))
    assert derived_state() == states[1]


def test_calls_out_of_time_order_across_batches_fall_back_to_the_database(
    ingest, tmp_path, monkeypatch
):
    monkeypatch.setattr(ingest_loader, "BATCH_SIZE", 5)
    lines = claude_session(12)
    # The last calls were written first: their batch holds the earliest timestamps.
    early = [claude_assistant(f"e{i}", f"re{i}", t=-100 + i, cr=1000 * (i + 1)) for i in range(6)]
    write_lines(tmp_path / "sess-1.jsonl", lines + early)
    summary = ingest(tmp_path / "sess-1.jsonl")
    assert summary.calls == 18 and not summary.derived_sessions
    indexes = list(Call.objects.order_by("timestamp").values_list("session_index", flat=True))
    assert indexes == list(range(18))  # the re-index put them in time order
    assert Session.objects.get().call_count == 18


def test_a_loader_over_its_memory_budget_leaves_derivation_to_the_database(
    ingest, tmp_path, monkeypatch
):
    monkeypatch.setattr(ingest_loader, "LOADED_DERIVE_MAX_CALLS", 10)
    write_lines(tmp_path / "sess-1.jsonl", claude_session(25))
    summary = ingest(tmp_path / "sess-1.jsonl")
    assert not summary.derived_sessions
    session = Session.objects.get()
    assert session.call_count == 25 and Run.objects.filter(session=session).count() == 1


def test_deleting_a_session_removes_its_calls_texts_and_touches(ingest, tmp_path):
    write_corpus(tmp_path, sessions=2)
    ingest(tmp_path)
    doomed, kept = Session.objects.order_by("id")
    counts = (
        Call.objects.filter(session=kept).count(),
        FileTouch.objects.filter(session=kept).count(),
    )
    doomed.delete()
    assert not Call.objects.filter(session_id=doomed.pk).exists()
    assert not FileTouch.objects.filter(session_id=doomed.pk).exists()
    assert not Agent.objects.filter(session_id=doomed.pk).exists()
    assert CallText.objects.count() == Call.objects.count() == counts[0]
    assert FileTouch.objects.count() == counts[1]


def test_a_session_another_loader_touched_meanwhile_is_derived_from_the_database(
    workspace, ingest, tmp_path
):
    from traces.formats.claude_code import ClaudeCodeParser
    from traces.ingest import IngestSummary, TraceLoader

    main = tmp_path / "sess-1.jsonl"
    write_lines(main, claude_session(30))
    summary = IngestSummary()
    loader = TraceLoader(
        workspace=workspace,
        summary=summary,
        file_name=main.name,
        batch_size=7,
        derive_new_sessions=True,
    )
    with main.open("rb") as handle:
        for record in ClaudeCodeParser(main.name).parse(handle):
            loader.feed(record)
    loader.flush()  # the first loader's calls are in; its derivation has not run yet
    sub = tmp_path / "sess-1" / "subagents" / "agent-abc.jsonl"
    sub.parent.mkdir(parents=True)
    write_lines(
        sub,
        [claude_assistant(f"s{i}", f"rs{i}", t=40 + i, cr=9000, sidechain=True) for i in range(4)],
    )
    ingest(sub)  # a second loader adds calls to the same session and derives it
    assert loader.finish() == set() and summary.derived_sessions == {Session.objects.get().pk}
    session = Session.objects.get()
    assert session.call_count == 34 and Run.objects.filter(session=session).count() >= 2
    state = derived_state()
    sessions_derive(session_ids=[session.pk])
    assert derived_state() == state  # no duplicated runs or touches, nothing missing


def test_files_sharing_a_loader_are_recorded_only_once_their_calls_are_committed(
    workspace, tmp_path
):
    from traces.ingest import IngestSummary
    from traces.services import _ingest_upload_into, _Ingestion, raw_upload_store

    uploads = []
    for n in range(2):
        data = ("\n".join(claude_session(20, session=f"sess-{n}")) + "\n").encode()
        upload, _ = raw_upload_store(
            workspace=workspace, name=f"sess-{n}.jsonl", chunks=[data], source="cli"
        )
        uploads.append(upload)
    ingestion = _Ingestion(workspace=workspace, summary=IngestSummary())
    for upload in uploads:
        _ingest_upload_into(ingestion, upload)
    # The worker dies here: its calls and sessions were still in the shared batch, and no
    # file was recorded as complete, so the retry reads both files again.
    assert not Session.objects.exists() and not Call.objects.exists()
    assert not IngestedFile.objects.filter(complete=True).exists()
    retry = _Ingestion(workspace=workspace, summary=IngestSummary())
    for upload in uploads:
        _ingest_upload_into(retry, upload)
    pending = retry.finish()
    assert Call.objects.count() == 40 and IngestedFile.objects.count() == 2
    # The retry created both sessions, so it derived them from the rows it loaded.
    assert pending == set() and retry.summary.derived_sessions == set(
        Session.objects.values_list("id", flat=True)
    )
    assert sorted(Session.objects.values_list("call_count", flat=True)) == [20, 20]
    assert retry.summary.files == 2 and retry.summary.calls == 40
    assert retry.summary.sessions == 2


def test_chunks_keep_file_order_and_give_every_worker_several(tmp_path):
    from traces.services import CHUNK_FILES, _chunks

    paths = []
    for n in range(200):
        path = tmp_path / f"{n:03}.jsonl"
        path.write_bytes(b"x" * 1000)
        paths.append(path)
    chunks = _chunks(paths, total=200_000, workers=2)
    assert [p for chunk in chunks for p in chunk] == [str(p) for p in paths]
    assert len(chunks) >= 8 and max(len(c) for c in chunks) <= CHUNK_FILES
    assert _chunks(paths[:1], total=1000, workers=2) == [[str(paths[0])]]


@pytest.mark.django_db(transaction=True)
def test_a_loader_waiting_on_a_session_lock_sees_runs_committed_meanwhile(ingest, tmp_path):
    """A worker derives the session while the loader's derive waits for its lock. After the
    wait, the loader must see those runs (and derive from the database), not insert its own."""
    import threading
    import time

    from django.db import connection, connections, transaction

    from traces import derive

    path = tmp_path / "sess-w.jsonl"
    write_lines(path, claude_session(40, session="sess-w"))
    ingest(path)
    expected = derived_state()
    session = Session.objects.get()
    with connection.cursor() as cursor:
        cursor.execute(derive.CALLS_SQL, [[session.pk]])
        rows = [tuple(row[1:]) for row in cursor.fetchall()]
        cursor.execute("CREATE TABLE held_runs AS SELECT * FROM traces_run")
    try:
        Run.objects.all().delete()
        holder = connections.create_connection("default")
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute(derive.LOCK_SQL, [[session.pk]])
            cursor.execute("INSERT INTO traces_run SELECT * FROM held_runs")
        errors: list = []

        def load():
            try:
                with transaction.atomic():
                    derive.sessions_derive_loaded(
                        workspace_id=session.workspace_id, calls={session.pk: rows}
                    )
            except Exception as exc:  # asserted below
                errors.append(exc)
            finally:
                connections.close_all()

        thread = threading.Thread(target=load)
        thread.start()
        with holder.cursor() as cursor:
            for _ in range(1500):  # until the loader waits for the session's lock
                cursor.execute(
                    "SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                    "WHERE c.relname = 'traces_session' AND NOT l.granted "
                    "UNION SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted"
                )
                if cursor.fetchone():
                    break
                time.sleep(0.02)
            else:
                raise AssertionError("the loader never waited for the session lock")
        holder.commit()
        holder.close()
        thread.join()
        assert errors == []
        assert derived_state() == expected
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS held_runs")
