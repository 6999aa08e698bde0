"""The streaming rule and agent identity, end to end: parser, loader flushes, files and
later ingests (issue 15, defects 1, 2 and 7)."""

import itertools
from datetime import UTC, datetime

import pytest

from tests.traces.factories import (
    claude_assistant,
    claude_boundary,
    claude_session,
    claude_user,
    write_lines,
)
from traces.formats.claude_code import FLUSH_WINDOW, ClaudeCodeParser
from traces.formats.records import CallRecord
from traces.ingest import IngestSummary, TraceLoader, decompress_text
from traces.models import Agent, Call, Compaction, IngestedFile, Session

pytestmark = pytest.mark.django_db


def _tool_call(n: int, *, out: int = 5, t: float | None = None) -> str:
    block = {"type": "tool_use", "id": f"tool-{n}", "name": "Read", "input": {"file_path": f"f{n}"}}
    return claude_assistant(f"m{n}", f"r{n}", t=n if t is None else t, out=out, content=[block])


def _streamed_call(n: int, *, t: float, final: int) -> list[str]:
    """A thinking block with the placeholder count, then the text with the final count."""
    return [
        claude_assistant(
            f"m{n}", f"r{n}", t=t, out=1, content=[{"type": "thinking", "thinking": "…"}]
        ),
        claude_assistant(
            f"m{n}", f"r{n}", t=t + 0.1, out=final, content=[{"type": "text", "text": f"done {n}"}]
        ),
    ]


def _calls(records) -> list[CallRecord]:
    return [r for r in records if isinstance(r, CallRecord)]


def test_a_streamed_call_is_emitted_once_while_many_calls_await_tool_results():
    """More than FLUSH_WINDOW calls wait for results that never come; each streamed call
    after them used to be emitted at its first block (placeholder output) and again."""
    lines = [claude_user("go", t=0)]
    lines += [_tool_call(n) for n in range(FLUSH_WINDOW + 36)]
    for n in range(1000, 1050):
        lines += _streamed_call(n, t=n, final=n - 900)
    records = _calls(ClaudeCodeParser("s.jsonl").parse(line.encode() for line in lines))
    streamed = [r for r in records if int(r.key[1:].split(":")[0]) >= 1000]
    assert len(records) == FLUSH_WINDOW + 36 + 50
    assert sorted(r.output_tokens for r in streamed) == list(range(100, 150))
    assert all(r.reemitted is False for r in records)
    assert all(len(r.text["blocks"]) == 2 for r in streamed)


def test_blocks_interleaved_with_parallel_tool_results_make_one_call():
    block = {"type": "tool_use", "name": "Read"}
    lines = [claude_user("go", t=0)]
    for n in range(FLUSH_WINDOW * 3):
        lines += [
            claude_assistant("m", "r", t=1, out=1, content=[{**block, "id": f"a{n}", "input": {}}]),
            claude_user([{"type": "tool_result", "tool_use_id": f"a{n}", "content": "x"}], t=2),
        ]
    lines.append(claude_assistant("m", "r", t=3, out=900, content=[{**block, "id": "z"}]))
    (call,) = _calls(ClaudeCodeParser("s.jsonl").parse(line.encode() for line in lines))
    assert call.output_tokens == 900
    assert len(call.text["blocks"]) == FLUSH_WINDOW * 3 + 1
    assert len(call.text["results"]) == FLUSH_WINDOW * 3


def _record(out: int, *, cr: int = 1000, sidechain: bool = False, reemitted: bool = False, t=0):
    return CallRecord(
        harness="claude-code",
        session_id="sess-1",
        agent_id="main",
        key="m1:r1",
        timestamp=datetime(2026, 3, 1, 9, 0, t, tzinfo=UTC),
        model="claude-sonnet-4-5",
        input_tokens=3,
        cache_creation_tokens=100,
        cache_read_tokens=cr,
        output_tokens=out,
        reasoning_tokens=0,
        context_tokens=103 + cr,
        line=t + 1,
        is_sidechain=sidechain,
        text={"blocks": [{"type": "text", "text": f"part {out}/{cr}"}]},
        reemitted=reemitted,
    )


@pytest.mark.parametrize(
    "emissions, kept",
    [
        ([_record(1), _record(77, reemitted=True)], (77, 1000)),
        ([_record(77), _record(1, reemitted=True)], (77, 1000)),
        # The last line on a tie.
        ([_record(5, cr=1000), _record(5, cr=2000, reemitted=True)], (5, 2000)),
        # A main-thread line beats a sidechain line, whatever its output.
        ([_record(9), _record(500, sidechain=True, reemitted=True)], (9, 1000)),
        ([_record(500, sidechain=True), _record(9, reemitted=True)], (9, 1000)),
    ],
)
@pytest.mark.parametrize("batch_size", [1, 100])
def test_the_kept_line_rule_holds_across_loader_flushes(workspace, emissions, kept, batch_size):
    summary = IngestSummary()
    loader = TraceLoader(
        workspace=workspace,
        summary=summary,
        file_name="s.jsonl",
        batch_size=batch_size,
        derive_new_sessions=True,
    )
    for record in emissions:
        loader.feed(record)
    loader.finish()
    call = Call.objects.get()
    assert (call.output_tokens, call.cache_read_tokens) == kept
    assert (summary.calls, summary.output, summary.cache_read) == (1, *kept)
    assert summary.duplicates_dropped == 1
    # The stored content holds both emissions' blocks.
    blocks = decompress_text(call.text.data)["blocks"]
    assert len(blocks) == 2


def test_a_call_split_across_files_keeps_its_final_count_in_either_order(ingest, tmp_path):
    head = [claude_user("go", t=0), *_streamed_call(1, t=1, final=640)[:1]]
    tail = _streamed_call(1, t=1, final=640)[1:]
    early, late = tmp_path / "a" / "sess-1.jsonl", tmp_path / "b" / "sess-1.jsonl"
    for path, lines in ((early, head), (late, tail)):
        path.parent.mkdir()
        write_lines(path, lines)
    first = ingest(early)
    second = ingest(late)
    call = Call.objects.get()
    assert call.output_tokens == 640
    assert (first.output, second.output) == (1, 639)  # the later ingest reports what it added
    assert (second.calls, second.duplicates_dropped) == (0, 1)
    session = Session.objects.get()
    assert (session.call_count, session.output_tokens) == (1, 640)
    Call.objects.all().delete()
    Session.objects.all().delete()
    IngestedFile.objects.all().delete()
    summary = ingest(late.parent, early.parent)  # the final line first, then the placeholder
    assert Call.objects.get().output_tokens == 640
    assert (summary.calls, summary.output) == (1, 640)


def test_a_grown_file_updates_the_call_whose_last_block_was_appended(ingest, tmp_path):
    path = tmp_path / "sess-1.jsonl"
    lines = claude_session(30)
    lines += _streamed_call(99, t=900, final=812)
    write_lines(path, lines[:-1])
    ingest(path)
    assert Call.objects.get(key="m99:r99").output_tokens == 1
    write_lines(path, lines)
    summary = ingest(path)
    assert Call.objects.get(key="m99:r99").output_tokens == 812
    assert (summary.calls, summary.output, summary.compactions) == (0, 811, 0)
    assert Session.objects.get().output_tokens == sum(
        Call.objects.values_list("output_tokens", flat=True)
    )


def _sidechain_lines(agent: str | None, steps: int, *, t0: float, root_parent="main-1") -> list:
    """A subagent's inline sidechain: its prompt, then calls whose tool results carry no
    agentId; only the assistant lines carry `agent` (when given)."""
    named = {"agentId": agent} if agent else {}
    lines = [
        claude_user(f"Survey {agent}", t=t0, sidechain=True, uuid=f"{agent}-p", parent=root_parent)
    ]
    parent = f"{agent}-p"
    for n in range(steps):
        block = {"type": "tool_use", "id": f"{agent}-t{n}", "name": "Grep", "input": {}}
        lines.append(
            claude_assistant(
                f"{agent}-m{n}",
                f"{agent}-r{n}",
                t=t0 + n + 0.1,
                sidechain=True,
                uuid=f"{agent}-a{n}",
                parent=parent,
                content=[block],
                **named,
            )
        )
        result = [{"type": "tool_result", "tool_use_id": f"{agent}-t{n}", "content": "hits"}]
        lines.append(
            claude_user(
                result, t=t0 + n + 0.5, sidechain=True, uuid=f"{agent}-u{n}", parent=f"{agent}-a{n}"
            )
        )
        parent = f"{agent}-u{n}"
    return lines


def test_sidechain_tool_results_without_agent_id_belong_to_their_parents_agent(ingest, tmp_path):
    lines = [claude_user("go", t=0, uuid="main-1")]
    for number, agent in enumerate(["aa01", "aa02", "aa03"]):
        lines += _sidechain_lines(agent, 40, t0=100 * (number + 1))
    write_lines(tmp_path / "sess-1.jsonl", lines)
    summary = ingest(tmp_path / "sess-1.jsonl")
    assert summary.agents == Agent.objects.count() == 4  # main and the three subagents
    session = Session.objects.get()
    assert (session.agent_count, session.call_count) == (4, 120)
    for agent in Agent.objects.exclude(external_id="main"):
        assert Call.objects.filter(agent=agent).count() == 40


def test_a_sidechain_without_any_agent_id_is_one_agent_per_chain(ingest, tmp_path):
    lines = [claude_user("go", t=0, uuid="main-1")]
    lines += _sidechain_lines(None, 25, t0=100)
    write_lines(tmp_path / "sess-1.jsonl", lines)
    ingest(tmp_path / "sess-1.jsonl")
    assert Agent.objects.count() == 2
    assert Call.objects.exclude(agent__external_id="main").count() == 25


def test_an_agent_that_made_no_call_gets_no_row(ingest, tmp_path):
    lines = [
        claude_user("go", t=0, uuid="main-1"),
        claude_assistant("m1", "r1", t=1, uuid="a-1", parent="main-1"),
        # A subagent that was started and never answered.
        claude_user("Survey", t=2, sidechain=True, uuid="s-1", parent="a-1", agentId="idle"),
    ]
    write_lines(tmp_path / "sess-1.jsonl", lines)
    summary = ingest(tmp_path / "sess-1.jsonl")
    assert list(Agent.objects.values_list("external_id", flat=True)) == ["main"]
    assert summary.agents == 1 and Session.objects.get().agent_count == 1


def test_file_bookkeeping_counts_calls_only_and_links_each_call_to_its_file(ingest, tmp_path):
    lines = claude_session(12)
    lines.insert(8, claude_boundary(t=40, pre=150_000))
    write_lines(tmp_path / "sess-1.jsonl", lines)
    ingest(tmp_path / "sess-1.jsonl")
    stored = IngestedFile.objects.get()
    assert stored.calls == 12
    assert Compaction.objects.count() == 1
    assert set(Call.objects.values_list("source_file_id", flat=True)) == {stored.pk}


def test_appending_calls_without_a_boundary_adds_no_compaction(ingest, tmp_path):
    path = tmp_path / "sess-1.jsonl"
    lines = claude_session(150)
    lines.insert(40, claude_boundary(t=130, pre=150_000, uuid="cb-1"))
    lines.insert(100, claude_boundary(t=300, pre=150_000, uuid="cb-2"))
    write_lines(path, lines[: -102 * 3])
    first = ingest(path)
    write_lines(path, lines)
    second = ingest(path)
    assert first.compactions == 2 and second.compactions == 0
    assert Compaction.objects.count() == 2
    assert second.calls == 102


def _sidechain_session() -> list[str]:
    """Main calls, a compaction whose summary line follows its boundary, and an inline
    sidechain whose tool results name no agent."""
    lines = claude_session(25)
    lines.insert(30, claude_boundary(t=95, pre=160_000, uuid="cb-1"))
    lines.insert(
        31,
        claude_user("This session is being continued …", t=95.5, isCompactSummary=True),
    )
    lines += _sidechain_lines("ab12", 12, t0=400, root_parent="user-0")
    lines += [line for n in range(60, 66) for line in _streamed_call(n, t=600 + n, final=300 + n)]
    return lines


def _parse_in_parts(parser_class, lines: list[bytes], cuts: list[int], **kwargs) -> dict:
    """Records by key from parsing `lines` in parts, each part resuming from the state the
    previous part left; emissions of one call are merged by the loader's rule."""
    from traces.formats.records import CompactionRecord, merge_call_records

    calls, compactions, state, start = {}, {}, None, 0
    for cut in [*cuts, len(lines)]:
        parser = parser_class("sess-1.jsonl", state=state, **kwargs)
        for record in parser.parse(iter(lines[start:cut])):
            if isinstance(record, CallRecord):
                earlier = calls.get(record.key)
                calls[record.key] = merge_call_records(earlier, record) if earlier else record
            elif isinstance(record, CompactionRecord):
                compactions[record.key] = record
        state = parser.state(lines=cut)
        start = cut
    return {
        "calls": {
            k: (r.agent_id, r.output_tokens, r.cache_read_tokens, r.line, len(r.text["blocks"]))
            for k, r in calls.items()
        },
        "compactions": {
            k: (r.trigger, r.pre_tokens, r.summary_tokens) for k, r in compactions.items()
        },
    }


def test_a_parse_resumed_from_its_state_equals_a_parse_of_the_whole_file():
    lines = [line.encode() for line in _sidechain_session()]
    whole = _parse_in_parts(ClaudeCodeParser, lines, [])
    assert len(whole["calls"]) == 25 + 12 + 6 and len(whole["compactions"]) == 1
    for cut in range(1, len(lines)):
        assert _parse_in_parts(ClaudeCodeParser, lines, [cut]) == whole, f"cut at line {cut}"
    assert _parse_in_parts(ClaudeCodeParser, lines, list(range(3, len(lines), 7))) == whole


def test_a_codex_parse_resumed_from_its_state_equals_a_parse_of_the_whole_file(shared_fixtures):
    from traces.formats.codex import CodexParser

    path = next(shared_fixtures.glob("madshn__localpush__rollout-*T12-54-34*.jsonl"))
    lines = path.read_bytes().splitlines()
    whole = _parse_in_parts(CodexParser, lines, [])
    assert whole["calls"]
    step = max(1, len(lines) // 40)
    for cut in range(1, len(lines), step):
        assert _parse_in_parts(CodexParser, lines, [cut]) == whole, f"cut at line {cut}"


def _stored(workspace) -> dict:
    sessions = {
        s.external_id: (
            s.call_count, s.agent_count, s.compaction_count, s.input_tokens,
            s.cache_creation_tokens, s.cache_read_tokens, s.output_tokens,
        )
        for s in Session.objects.filter(workspace=workspace)
    }  # fmt: skip
    calls = sorted(
        Call.objects.filter(workspace=workspace).values_list(
            "key", "agent__external_id", "session_index", "output_tokens", "cache_read_tokens"
        )
    )
    compactions = sorted(
        Compaction.objects.filter(workspace=workspace).values_list(
            "key", "pre_tokens", "summary_tokens"
        )
    )
    return {"sessions": sessions, "calls": calls, "compactions": compactions}


def test_a_file_that_grows_in_steps_ends_as_if_read_once(
    ingest, tmp_path, workspace, other_workspace
):
    text = "\n".join(_sidechain_session()) + "\n"
    whole = tmp_path / "whole" / "sess-1.jsonl"
    whole.parent.mkdir()
    whole.write_text(text)
    ingest(whole, target=other_workspace)
    path = tmp_path / "grows" / "sess-1.jsonl"
    path.parent.mkdir()
    data = text.encode()
    # Cut inside lines too: a transcript is read while it is being written.
    cuts = [len(data) * k // 7 + 13 for k in range(1, 7)] + [len(data)]
    read = []
    for cut in cuts:
        path.write_bytes(data[:cut])
        summary = ingest(path)
        read.append(IngestedFile.objects.filter(workspace=workspace).latest("pk"))
        if cut < len(data):
            (error,) = summary.errors
            assert error["error"].startswith("the last line has no newline yet")
            assert summary.malformed_lines == read[-1].malformed_lines == 0
        else:
            assert summary.errors == []
    assert _stored(workspace) == _stored(other_workspace)
    # Each read after the first started where the one before stopped (its last full line).
    for before, after in itertools.pairwise(read):
        assert after.grown_from == before
        assert after.start_offset == before.parser_state["offset"] <= before.size
    assert sum(r.lines for r in read) == len(text.splitlines()) + len(cuts) - 1


@pytest.mark.postgres
def test_a_bulk_load_refreshes_the_planners_statistics(ingest, tmp_path, settings):
    from django.db import connection

    settings.GOVERNANCE_ANALYZE_AFTER_CALLS = 30
    write_lines(tmp_path / "sess-1.jsonl", claude_session(40))
    write_lines(tmp_path / "sess-2.jsonl", claude_session(20, session="sess-2"))

    def estimated_rows(table: str) -> float:
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
            return cursor.fetchone()[0]

    ingest(tmp_path / "sess-2.jsonl")  # fewer calls than the threshold: no ANALYZE
    assert estimated_rows("traces_call") != 20
    ingest(tmp_path / "sess-1.jsonl")
    assert (estimated_rows("traces_call"), estimated_rows("traces_session")) == (60, 2)
