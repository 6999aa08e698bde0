"""Claude Code parser: real fixtures with independently computed counts, and crafted edge cases."""

import json
from collections import defaultdict

import pytest

from tests.traces.factories import (
    claude_assistant,
    claude_boundary,
    claude_session,
    claude_user,
    ts,
)
from traces.formats.claude_code import ClaudeCodeParser
from traces.formats.records import AgentInfo, CallRecord, CompactionRecord, ParseError, SessionInfo


def parse(lines, path="session.jsonl", meta=None):
    parser = ClaudeCodeParser(path, meta=meta)
    records = list(parser.parse(line.encode() for line in lines))
    return parser, records


def calls_of(records):
    return [r for r in records if isinstance(r, CallRecord)]


def expected_groups(path):
    """Independent reference: group usage lines by (sessionId, message.id, requestId)."""
    groups = defaultdict(list)
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") or {}
        if not isinstance(message.get("usage"), dict) or message.get("model") == "<synthetic>":
            continue
        groups[(entry["sessionId"], message["id"], entry.get("requestId"))].append(entry)
    return groups


CLAUDE_FIXTURES = {  # file -> calls, as the reference above counts them
    "d-kimuson__claude-code-viewer__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl": 7,
    "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": 20,
    "d-kimuson__claude-code-viewer__agent-test-hash-123.jsonl": 1,
    "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": 170,
    "daaain__claude-code-log__dag_compact_after_rewind.jsonl": 5,
    "ryoppippi__ccusage__claude-project-alpha-chat.jsonl": 3,
}


def test_every_real_claude_transcript_is_covered(shared_fixtures):
    names = {p.name for p in shared_fixtures.glob("*.jsonl") if "codex" not in p.name}
    assert names - {n for n in names if "rollout-" in n} == set(CLAUDE_FIXTURES)


@pytest.mark.parametrize("name", sorted(CLAUDE_FIXTURES))
def test_every_real_claude_transcript_matches_the_independent_reference(shared_fixtures, name):
    path = shared_fixtures / name
    groups = expected_groups(path)
    assert len(groups) == CLAUDE_FIXTURES[name]
    parser = ClaudeCodeParser(str(path))
    calls = calls_of(list(parser.parse(path.open("rb"))))
    assert sorted((c.session_id, c.key) for c in calls) == sorted(
        (session, f"{message}:{request}" if request else message)
        for session, message, request in groups
    )
    assert parser.stats.duplicates_dropped == sum(len(g) for g in groups.values()) - len(groups)
    assert sum(c.output_tokens for c in calls) == sum(
        max(e["message"]["usage"]["output_tokens"] for e in g) for g in groups.values()
    )
    assert parser.stats.malformed_lines == 0


def test_real_1_0_98_transcript_dedups_262_lines_to_170_calls(shared_fixtures):
    path = (
        shared_fixtures
        / "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    )
    groups = expected_groups(path)
    assert sum(len(g) for g in groups.values()) == 262 and len(groups) == 170
    parser = ClaudeCodeParser(str(path))
    records = list(parser.parse(path.open("rb")))
    calls = calls_of(records)
    assert len(calls) == 170
    assert parser.stats.duplicates_dropped == 92
    assert parser.stats.malformed_lines == 0
    # The kept line is the one with the highest output_tokens of its group.
    expected_output = sum(
        max(e["message"]["usage"]["output_tokens"] for e in g) for g in groups.values()
    )
    assert sum(c.output_tokens for c in calls) == expected_output
    # Input and cache fields are identical within a group, so the context is too.
    first = {k: g[0]["message"]["usage"] for k, g in groups.items()}
    expected_context = sum(
        u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        for u in first.values()
    )
    assert sum(c.context_tokens for c in calls) == expected_context
    # 244 of the 262 assistant lines are inline sidechain (Task subagent) lines.
    main_groups = {k for k, g in groups.items() if not g[0]["isSidechain"]}
    assert sum(1 for c in calls if c.agent_id == "main") == len(main_groups) == 9
    agents = [r for r in records if isinstance(r, AgentInfo)]
    assert len(agents) == 5
    assert {a.description for a in agents} == {
        "Setup Next.js project", "Create data models", "Build TODO components",
        "Implement state management", "Create main page integration",
    }  # fmt: skip
    assert all(
        a.spawn_tool_call_id.startswith("toolu_") and a.start_kind == "fresh" for a in agents
    )
    titles = [r.title for r in records if isinstance(r, SessionInfo) and r.title]
    assert titles == ["Empty Repo Setup: CLAUDE.md Foundation Created"]


def test_synthetic_compaction_fixture(shared_fixtures):
    path = shared_fixtures / "daaain__claude-code-log__dag_compact_after_rewind.jsonl"
    _, records = parse(path.read_text().splitlines(), str(path))
    compactions = [r for r in records if isinstance(r, CompactionRecord)]
    assert len(compactions) == 1
    compaction = compactions[0]
    assert (compaction.trigger, compaction.pre_tokens, compaction.kind) == ("auto", 150000, "full")
    summary = "This session is being continued from a previous conversation that ran out of context. Summary: the user asked for a plan."
    assert compaction.summary_tokens == (len(summary) + 3) // 4 and compaction.summary_estimated
    assert len(calls_of(records)) == 5


def test_lines_without_type_but_with_usage_are_calls(shared_fixtures):
    path = shared_fixtures / "ryoppippi__ccusage__claude-project-alpha-chat.jsonl"
    _, records = parse(path.read_text().splitlines())
    calls = calls_of(records)
    assert [c.output_tokens for c in calls] == [50, 75, 125]
    assert [c.context_tokens for c in calls] == [135, 270, 340]
    assert calls[1].model == "claude-opus-4-20250514"


def test_subagent_file_with_meta_sidecar(shared_fixtures):
    path = shared_fixtures / "d-kimuson__claude-code-viewer__agent-test-hash-123.jsonl"
    meta = {"agentType": "general-purpose", "description": "Run the tests", "toolUseId": "toolu_X"}
    _, records = parse(path.read_text().splitlines(), str(path), meta=meta)
    agent = next(r for r in records if isinstance(r, AgentInfo))
    assert (agent.agent_id, agent.kind, agent.description, agent.spawn_tool_call_id) == (
        "test-hash-123", "subagent", "Run the tests", "toolu_X",
    )  # fmt: skip
    assert calls_of(records)[0].agent_id == "test-hash-123"


def test_highest_output_wins_and_last_on_a_tie():
    lines = [
        claude_assistant("m1", "r1", out=1, content=[{"type": "text", "text": "a"}]),
        claude_assistant(
            "m1",
            "r1",
            out=90,
            cr=5000,
            content=[
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/x.py"}}
            ],
        ),
        claude_assistant("m1", "r1", out=90, cr=6000, content=[{"type": "text", "text": "b"}]),
        claude_assistant("m1", "r1", out=3, cr=7000, content=[]),
    ]
    parser, records = parse(lines)
    (call,) = calls_of(records)
    assert call.output_tokens == 90 and call.cache_read_tokens == 6000  # the later of the two 90s
    assert parser.stats.duplicates_dropped == 3
    kinds = [b["type"] for b in call.text["blocks"]]
    assert kinds == ["text", "tool_use", "text"]  # blocks of all lines are merged
    assert call.touches == [("read", "/x.py")] and call.signature == ["Read"]


def test_missing_request_id_falls_back_to_message_id():
    lines = [
        claude_assistant("m1", None, out=1),
        claude_assistant("m1", None, out=7),
        claude_assistant("m2", None, out=2),
    ]
    _, records = parse(lines)
    assert [(c.key, c.output_tokens) for c in calls_of(records)] == [("m1", 7), ("m2", 2)]


def test_the_same_ids_in_two_sessions_of_one_file_are_two_calls():
    lines = [
        claude_assistant("m1", "r1", out=4, session="sess-a"),
        claude_assistant("m1", "r1", out=9, session="sess-b"),
        claude_assistant("m1", "r1", out=6, session="sess-a"),  # a streamed re-emit in A
    ]
    parser, records = parse(lines)
    calls = sorted((c.session_id, c.key, c.output_tokens) for c in calls_of(records))
    assert calls == [("sess-a", "m1:r1", 6), ("sess-b", "m1:r1", 9)]
    assert parser.stats.duplicates_dropped == 1


def test_same_message_under_different_request_ids_are_two_calls_unless_a_sidechain_replay():
    lines = [claude_assistant("m1", "r1", out=5), claude_assistant("m1", "r2", out=6)]
    assert len(calls_of(parse(lines)[1])) == 2
    replay = [
        claude_assistant("m1", "r1", out=5),
        claude_assistant("m1", "r2", out=9, sidechain=True, uuid="s1"),
    ]
    (call,) = calls_of(parse(replay)[1])
    assert (
        call.key == "m1:r1" and call.output_tokens == 5 and not call.is_sidechain
    )  # the parent line wins


def test_synthetic_model_lines_are_not_calls():
    lines = [
        claude_assistant("m1", "r1", model="<synthetic>", inp=0, cc=0, cr=0, out=0),
        claude_assistant("m2", "r2"),
    ]
    assert [c.key for c in calls_of(parse(lines)[1])] == ["m2:r2"]


def test_compaction_boundary_summary_and_microcompact():
    lines = [
        claude_assistant("m1", "r1", t=1, cr=150_000),
        claude_boundary(t=2, pre=150_205, trigger="manual", postTokens=40_000, durationMs=95_000),
        claude_user("This session is being continued… " + "x" * 400, t=3, isCompactSummary=True),
        claude_assistant("m2", "r2", t=4, cr=41_000),
        json.dumps(
            {
                "type": "system",
                "subtype": "microcompact_boundary",
                "sessionId": "sess-1",
                "uuid": "mc",
                "timestamp": ts(5),
                "microcompactMetadata": {
                    "trigger": "auto",
                    "preTokens": 90_000,
                    "tokensSaved": 20_000,
                },
            }
        ),
    ]
    _, records = parse(lines)
    full, micro = [r for r in records if isinstance(r, CompactionRecord)]
    assert (full.trigger, full.pre_tokens, full.post_tokens, full.duration_ms, full.kind) == (
        "manual",
        150_205,
        40_000,
        95_000,
        "full",
    )
    assert full.summary_tokens > 100 and full.summary_estimated
    assert (micro.kind, micro.pre_tokens, micro.trigger) == ("micro", 90_000, "auto")


def test_summary_without_boundary_implies_a_compaction():
    lines = [
        claude_assistant("m1", "r1", t=1),
        claude_user("Summary of earlier work", t=2, isCompactSummary=True, uuid="sum1"),
    ]
    (compaction,) = (
        [r for r in records if isinstance(r, CompactionRecord)]
        if (records := parse(lines)[1])
        else []
    )
    assert compaction.key == "summary:sum1" and compaction.trigger == "unknown"


def test_inline_sidechains_become_separate_agents_linked_to_their_task():
    prompt = "Find every caller of parse_config"
    lines = [
        claude_assistant(
            "m1",
            "r1",
            t=1,
            uuid="a1",
            content=[
                {
                    "type": "tool_use",
                    "id": "toolu_task",
                    "name": "Task",
                    "input": {
                        "prompt": prompt,
                        "description": "Find callers",
                        "subagent_type": "Explore",
                    },
                }
            ],
        ),
        claude_user(prompt, t=2, sidechain=True, uuid="s-root"),
        claude_assistant(
            "m2",
            "r2",
            t=3,
            sidechain=True,
            uuid="s-a1",
            parent="s-root",
            content=[
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "Grep",
                    "input": {"pattern": "parse_config"},
                }
            ],
        ),
        claude_user(
            [{"type": "tool_result", "tool_use_id": "t2", "content": "a.py:3"}],
            t=4,
            sidechain=True,
            uuid="s-u2",
            parent="s-a1",
        ),
        claude_assistant("m3", "r3", t=5, sidechain=True, uuid="s-a2", parent="s-u2"),
        claude_user(
            [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "found 1 caller"}],
            t=6,
            uuid="u3",
            parent="a1",
        ),
    ]
    _, records = parse(lines)
    (agent,) = [r for r in records if isinstance(r, AgentInfo)]
    assert (agent.description, agent.agent_type, agent.spawn_tool_call_id) == (
        "Find callers",
        "Explore",
        "toolu_task",
    )
    by_key = {c.key: c for c in calls_of(records)}
    assert by_key["m1:r1"].agent_id == "main"
    assert by_key["m2:r2"].agent_id == by_key["m3:r3"].agent_id == agent.agent_id
    assert by_key["m2:r2"].text["results"]["t2"]["content"] == "a.py:3"
    # The Task result arrives after the subagent's lines and is still attached to the call that asked.
    assert by_key["m1:r1"].text["results"]["toolu_task"]["content"] == "found 1 caller"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"type": 7}', "field 'type' must be a string"),
        ('{"type": "hologram", "sessionId": "s"}', "unknown record type 'hologram'"),
        (
            claude_assistant("m9", "r9").replace('"output_tokens": 10', '"output_tokens": "ten"'),
            "field 'message.usage.output_tokens' must be a non-negative integer",
        ),
        (
            claude_assistant("m9", "r9").replace('"input_tokens": 5', '"input_tokens": -5'),
            "must be a non-negative integer",
        ),
        (
            claude_assistant("m9", "r9").replace(ts(0), "yesterday"),
            "field 'timestamp' is missing or not ISO-8601",
        ),
    ],
)
def test_bad_lines_are_reported_with_their_line_number_and_the_rest_is_kept(line, message):
    lines = [claude_assistant("m1", "r1", t=1), line, claude_assistant("m2", "r2", t=2)]
    _parser, records = parse(lines)
    errors = [r for r in records if isinstance(r, ParseError)]
    assert len(errors) == 1 and errors[0].line == 2 and message in errors[0].message
    assert [c.key for c in calls_of(records)] == ["m1:r1", "m2:r2"]


def test_a_record_without_any_session_id_is_reported():
    parser, records = parse(
        [
            '{"type": "assistant", "timestamp": "2026-01-01T00:00:00Z", "message": {"id": "m", "usage": {}}}'
        ]
    )
    assert [r.message for r in records if isinstance(r, ParseError)] == [
        "assistant record without 'sessionId'"
    ]
    assert parser.stats.malformed_lines == 1


def test_generated_session_counts():
    lines = claude_session(30, dup_lines=3)
    parser, records = parse(lines)
    calls = calls_of(records)
    assert len(calls) == 30 and parser.stats.duplicates_dropped == 60
    assert [c.output_tokens for c in calls] == [50 + i for i in range(30)]
    assert all(len(c.text["results"]) == 1 for c in calls)


def _tool_call(n: int, t: float) -> str:
    tool = {"type": "tool_use", "id": f"tool-{n}", "name": "Read", "input": {"file_path": f"f{n}"}}
    return claude_assistant(f"msg-{n}", f"req-{n}", t=t, content=[tool])


def _tool_result(n: int, t: float) -> str:
    result = {"type": "tool_result", "tool_use_id": f"tool-{n}", "content": f"contents of f{n}"}
    return claude_user([result], t=t, uuid=f"result-{n}")


def test_a_call_waits_for_its_late_tool_result_while_newer_calls_are_emitted():
    from traces.formats.claude_code import FLUSH_WINDOW

    newer = FLUSH_WINDOW * 2
    lines = [_tool_call(0, 0)]
    for n in range(1, newer + 1):  # newer calls whose results come at once
        lines += [_tool_call(n, n), _tool_result(n, n + 0.5)]
    lines.append(_tool_result(0, newer + 1))  # the first call's result comes last
    parser = ClaudeCodeParser("s.jsonl")
    emitted = []  # (key, lines read when it was emitted)
    by_key = {}
    for record in parser.parse(line.encode() for line in lines):
        if isinstance(record, CallRecord):
            emitted.append((record.key, parser.stats.lines))
            by_key[record.key] = record
    keys = [key for key, _ in emitted]
    assert sorted(keys) == sorted(f"msg-{n}:req-{n}" for n in range(newer + 1))
    # Newer calls stream out while the first one waits; it is emitted with its result.
    # Call n is line 2n: at call 64, 65 calls are pending and the oldest ready one goes.
    assert emitted[0] == ("msg-1:req-1", 2 * FLUSH_WINDOW)
    assert keys.index("msg-0:req-0") > keys.index(
        f"msg-{newer - FLUSH_WINDOW}:req-{newer - FLUSH_WINDOW}"
    )
    first = by_key["msg-0:req-0"]
    assert first.text["results"]["tool-0"]["content"] == "contents of f0"
    assert first.touches == [("read", "f0")]


def test_a_tool_result_that_never_comes_releases_its_call_after_the_wait_window(monkeypatch):
    import traces.formats.claude_code as claude_code
    from traces.formats.claude_code import parser as claude_code_parser

    # The window is read where the parser flushes, in the package's parser module.
    monkeypatch.setattr(claude_code_parser, "WAIT_WINDOW_LINES", 150)
    newer = claude_code.FLUSH_WINDOW + 100
    lines = [_tool_call(0, 0)]  # its result never arrives
    for n in range(1, newer + 1):
        lines += [_tool_call(n, n), _tool_result(n, n + 0.5)]
    parser = ClaudeCodeParser("s.jsonl")
    emitted = {}
    for record in parser.parse(line.encode() for line in lines):
        if isinstance(record, CallRecord):
            emitted[record.key] = (parser.stats.lines, record)
    released_at, first = emitted["msg-0:req-0"]
    # Released at the first flush once 150 lines have passed: line 152, the next call.
    assert released_at == 152
    assert "results" not in first.text and len(emitted) == newer + 1
