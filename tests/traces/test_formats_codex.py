"""Codex parser: real rollouts with independently computed counts, and crafted edge cases."""

import json

import pytest

from tests.traces.factories import codex_meta, codex_token_count, codex_turn, ts, usage
from traces.formats.codex import CodexParser
from traces.formats.records import CallRecord, CompactionRecord, ParseError

FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def parse(lines, path="rollout-2026-03-01T09-00-00-019c0000-0000-7000-8000-000000000001.jsonl"):
    parser = CodexParser(path)
    return parser, list(parser.parse(line.encode() for line in lines))


def calls_of(records):
    return [r for r in records if isinstance(r, CallRecord)]


def reference_counts(path):
    """Independent reference: token_count events whose total_token_usage grew."""
    previous, grew, repeated, final = None, 0, 0, None
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        payload = entry.get("payload") or {}
        if (
            entry["type"] != "event_msg"
            or payload.get("type") != "token_count"
            or payload.get("info") is None
        ):
            continue
        total = payload["info"]["total_token_usage"]
        if previous is not None and all(total[k] == previous[k] for k in FIELDS):
            repeated += 1
        else:
            grew += 1
        previous = final = total
    return grew, repeated, final


ROLLOUTS = [
    "madshn__localpush__rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl",
    "madshn__localpush__rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
    "madshn__localpush__rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl",
    "madshn__localpush__rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl",
    "madshn__localpush__rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
    "madshn__localpush__rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
]


def test_every_real_rollout_is_covered(shared_fixtures):
    assert sorted(p.name for p in shared_fixtures.glob("*rollout-*.jsonl")) == ROLLOUTS


@pytest.mark.parametrize("name", ROLLOUTS)
def test_real_rollouts_count_each_growth_once(shared_fixtures, name):
    path = shared_fixtures / name
    grew, repeated, final = reference_counts(path)
    parser = CodexParser(str(path))
    records = list(parser.parse(path.open("rb")))
    calls = calls_of(records)
    assert len(calls) == grew
    assert parser.stats.duplicates_dropped == repeated
    # Summing per-call deltas reproduces the session's final totals exactly.
    assert (
        sum(c.input_tokens + c.cache_read_tokens + c.cache_creation_tokens for c in calls)
        == final["input_tokens"]
    )
    assert sum(c.cache_read_tokens for c in calls) == final["cached_input_tokens"]
    assert sum(c.output_tokens for c in calls) == final["output_tokens"]
    assert all(c.model == "gpt-5.3-codex" for c in calls)
    assert calls[0].session_id == path.name.split("-", 6)[-1].removesuffix(".jsonl")[-36:]


def test_real_rollout_compaction_sizes(shared_fixtures):
    path = (
        shared_fixtures
        / "madshn__localpush__rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
    )
    grew, repeated, _ = reference_counts(path)
    assert (grew, repeated) == (286, 286)
    records = list(CodexParser(str(path)).parse(path.open("rb")))
    (compaction,) = [r for r in records if isinstance(r, CompactionRecord)]
    assert compaction.line == 1788 and compaction.pre_tokens == 209950
    calls = calls_of(records)
    after = next(c for c in calls if c.line > compaction.line)
    assert after.context_tokens == 48297


def test_fallback_session_without_meta(shared_fixtures):
    path = shared_fixtures / "ryoppippi__ccusage__codex-session-alpha.jsonl"
    parser = CodexParser(str(path), fallback_session_id="codex-session-alpha")
    calls = calls_of(parser.parse(path.open("rb")))
    assert [c.model for c in calls] == [
        "gpt-5.2-codex",
        "gpt-5.3-codex",
    ]  # info.model overrides the turn
    assert [
        (c.input_tokens, c.cache_read_tokens, c.output_tokens, c.reasoning_tokens) for c in calls
    ] == [(750, 250, 125, 75), (2000, 500, 300, 200)]
    assert [c.context_tokens for c in calls] == [1000, 2500]


def test_re_emits_and_non_billable_markers_are_dropped():
    lines = [
        codex_meta(),
        codex_turn(),
        codex_token_count(t=1, total=None, last=None),
        codex_token_count(t=2, total=usage(1000, 200, 50), last=usage(1000, 200, 50)),
        codex_token_count(t=3, total=usage(1000, 200, 50), last=usage(1000, 200, 50)),  # re-emit
        codex_token_count(t=4, total=usage(2500, 900, 80), last=usage(1500, 700, 30)),
        codex_token_count(
            t=5, total=usage(2500, 900, 80), last={**usage(0), "total_tokens": 940499}
        ),  # marker
        codex_token_count(t=6, total=usage(4000, 2000, 100), last=usage(1500, 1100, 20)),
    ]
    parser, records = parse(lines)
    calls = calls_of(records)
    assert [(c.input_tokens, c.cache_read_tokens, c.output_tokens, c.context_tokens) for c in calls] == [
        (800, 200, 50, 1000), (800, 700, 30, 1500), (400, 1100, 20, 1500),
    ]  # fmt: skip
    assert parser.stats.duplicates_dropped == 2


def test_totals_going_down_fall_back_to_last_usage():
    lines = [
        codex_meta(),
        codex_token_count(t=1, total=usage(5000, 0, 100), last=usage(5000, 0, 100)),
        codex_token_count(
            t=2, total=usage(1200, 0, 30), last=usage(1200, 0, 30)
        ),  # a newer build lowered the totals
        codex_token_count(t=3, total=usage(2500, 0, 60), last=usage(1300, 0, 30)),
    ]
    calls = calls_of(parse(lines)[1])
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [
        (5000, 100),
        (1200, 30),
        (1300, 30),
    ]


def test_token_usage_records_are_unique_per_thread_and_response():
    def record(response, inp, out):
        return json.dumps({"timestamp": ts(1), "type": "token_usage_record", "payload": {
            "thread_id": "th1", "turn_id": "tu1", "response_id": response, "usage": usage(inp, 10, out),
            "attribution": {"model": "gpt-5.5-codex", "context_length": inp},
        }})  # fmt: skip

    lines = [codex_meta(), record("resp1", 100, 5), record("resp1", 100, 5), record("resp2", 300, 7),
             codex_token_count(t=4, total=usage(9999, 0, 99), last=usage(9999, 0, 99))]  # fmt: skip
    parser, records = parse(lines)
    calls = calls_of(records)
    assert [(c.key, c.input_tokens, c.output_tokens, c.model) for c in calls] == [
        ("response:th1:resp1", 90, 5, "gpt-5.5-codex"), ("response:th1:resp2", 290, 7, "gpt-5.5-codex"),
    ]  # fmt: skip
    assert parser.stats.duplicates_dropped == 1


def test_tool_calls_outputs_and_patch_touches_attach_to_the_call():
    lines = [
        codex_meta(),
        json.dumps(
            {
                "timestamp": ts(1),
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": "pytest -q tests/test_x.py"}),
                    "call_id": "c1",
                },
            }
        ),
        json.dumps(
            {
                "timestamp": ts(1),
                "type": "response_item",
                "payload": {
                    "type": "custom_tool_call",
                    "name": "apply_patch",
                    "input": "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch",
                    "call_id": "c2",
                },
            }
        ),
        codex_token_count(t=2, total=usage(1000, 0, 10), last=usage(1000, 0, 10)),
        json.dumps(
            {
                "timestamp": ts(3),
                "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": "c1", "output": "1 passed"},
            }
        ),
    ]
    (call,) = calls_of(parse(lines)[1])
    assert call.signature == ["Bash:pytest", "Edit"]
    assert call.touches == [("edit", "src/app.py")]
    assert call.text["results"]["c1"]["content"] == "1 passed"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{oops", "malformed JSON"),
        ('"just a string"', "expected a JSON object, got str"),
        ('{"type": "event_msg"}', "event_msg record without a 'payload' object"),
        ('{"type": "mystery", "payload": {}}', "unknown record type 'mystery'"),
        (
            codex_token_count(t=9, total={**usage(1), "input_tokens": "many"}, last=None),
            "usage field 'input_tokens' must be a non-negative integer",
        ),
    ],
)
def test_bad_lines_are_reported_and_the_rest_is_kept(line, message):
    lines = [codex_meta(), codex_token_count(t=1, total=usage(100, 0, 5), last=usage(100, 0, 5)), line,
             codex_token_count(t=3, total=usage(300, 0, 9), last=usage(200, 0, 4))]  # fmt: skip
    _, records = parse(lines)
    errors = [r for r in records if isinstance(r, ParseError)]
    assert len(errors) == 1 and errors[0].line == 3 and message in errors[0].message
    assert len(calls_of(records)) == 2
