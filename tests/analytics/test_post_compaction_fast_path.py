"""The section as the analytics job computes it (packed call reads, the correction matches
stored at ingest) against a straightforward computation written here from the ORM, on
generated Claude Code corpora of several shapes: many short runs, runs longer than MAX_STEP,
inline sidechains, sessions that never compact, a Codex rollout. The stored matches are
checked as ingest writes them, stale (made under another list, or never: a database from
before they were stored), after a new session, and under another phrase list."""

import json
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from tests.analytics.test_post_compaction import _codex_rollout
from traces.analysis.post_compaction import (
    DEFAULT_PHRASES,
    MAX_STEP,
    Corpus,
    Observations,
    PhraseMatcher,
    post_compaction,
)
from traces.analytics.post_compaction_rows import observed_calls
from traces.analytics.post_compaction_selectors import (
    MAX_MATCHES,
    Rematched,
    _match_row,
    corpus_load,
)
from traces.analytics.post_compaction_services import (
    correction_phrases_save,
    post_compaction_section,
)
from traces.analytics.selectors import AnalyticsFilters
from traces.models import Call, OperatorPrompt, Run
from traces.services import ingest_bytes

pytestmark = pytest.mark.django_db
ALL = AnalyticsFilters()

PROMPTS = [
    "Now update the tests for the parser.",
    "No, that's wrong: keep the old signature.",
    "You forgot the migration again.",
    "Run the linters, then commit.",
    "<command-name>/clear</command-name>\n<command-message>clear</command-message>",
    "This session is being continued from a previous conversation. You were wrong.",
    "I told you not to touch the fixtures.",
]


def _transcript(number: int, rng: random.Random, segments: list[int], sidechains: bool) -> bytes:
    """A main thread of `segments` calls between compactions (one segment: no compaction),
    each call with a random prompt or none and 0-3 tool uses, some results flagged errors;
    with `sidechains`, inline subagent calls (isSidechain, agentId) between main calls."""
    session_id = f"00000000-0000-4000-8000-{number:012d}"
    clock = [datetime(2026, 4, 1, 9, tzinfo=UTC) + timedelta(hours=number)]
    lines, counter = [], [0]

    def line(kind, **fields):
        clock[0] += timedelta(seconds=3)
        counter[0] += 1
        lines.append({"sessionId": session_id, "version": "2.1.89", "cwd": "/w",
                      "userType": "external", "isSidechain": False, "type": kind,
                      "uuid": f"u{number}-{counter[0]:06d}",
                      "timestamp": clock[0].strftime("%Y-%m-%dT%H:%M:%S.000Z"), **fields})  # fmt: skip

    def call(tag: str, context: int, *, agent: str | None = None):
        side = {"isSidechain": True, "agentId": agent} if agent else {}
        if rng.random() < 0.6:
            line("user", message={"role": "user", "content": rng.choice(PROMPTS)}, **side)
        tools = [f"toolu_{tag}_{k}" for k in range(rng.choice([0, 1, 1, 2, 3]))]
        line("assistant", requestId=f"req_{tag}", **side, message={
            "id": f"msg_{tag}", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Working."}] + [
                {"type": "tool_use", "id": t, "name": "Read", "input": {"file_path": "/w/a.py"}}
                for t in tools],
            "stop_reason": "tool_use" if tools else "end_turn",
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 300,
                      "cache_read_input_tokens": context, "output_tokens": 40}})  # fmt: skip
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": t,
                "content": "no",
                "is_error": rng.random() < 0.3,
            }
            for t in tools
            if rng.random() < 0.85
        ]
        if blocks:
            line("user", message={"role": "user", "content": blocks}, **side)

    made = 0
    for k, length in enumerate(segments):
        if k:
            line("system", subtype="compact_boundary", content="Conversation compacted",
                 parentUuid=None, level="info", isMeta=False,
                 compactMetadata={"trigger": rng.choice(["auto", "manual"]),
                                  "preTokens": 150_000})  # fmt: skip
            line("user", isCompactSummary=True, isVisibleInTranscriptOnly=True, message={
                "role": "user", "content": "This session is being continued. You forgot X."})  # fmt: skip
        context = 20_000
        for _ in range(length):
            call(f"{number:03d}_{made:05d}", context)
            made += 1
            context += 400
            if sidechains and rng.random() < 0.08:
                agent = f"a{number:03d}{made:05d}"
                for j in range(rng.randint(2, 6)):
                    call(f"{number:03d}_{made:05d}_s{j}", 12_000 + j * 300, agent=agent)
    return b"\n".join(json.dumps(item).encode() for item in lines) + b"\n"


SHAPES = [
    ("many short runs", [3, 5, 7, 4, 9, 6, 3, 8, 5, 6, 4, 7, 5], False),
    ("long runs", [4, MAX_STEP + 30, 170], False),
    ("sidechains", [5, 60, 40, 20], True),
    ("no compaction", [90], False),
    ("short runs and sidechains", [2, 12, 3, 1, 15, 9], True),
]


def _ingest(workspace, numbers: range, rng: random.Random) -> None:
    for number in numbers:
        _, segments, sidechains = SHAPES[number % len(SHAPES)]
        ingest_bytes(workspace=workspace, name=f"s{number}.jsonl",
                     data=_transcript(number, rng, segments, sidechains), source="demo",
                     refresh_analytics=False)  # fmt: skip


@pytest.fixture
def generated(workspace):
    rng = random.Random(1818)
    _ingest(workspace, range(10), rng)
    ingest_bytes(workspace=workspace, name="rollout-2026-03-02T10-00-00-019c8a59.jsonl",
                 data=_codex_rollout(40, {1, 2, 30}), source="demo", refresh_analytics=False)  # fmt: skip
    return rng


def reference_section(workspace, phrases, filters=ALL) -> dict:
    """Written apart from the loader: every observed run from the ORM, its calls in agent
    order, each operator prompt matched, each tool result counted, row by row."""
    matcher = PhraseMatcher(phrases)
    runs = Run.objects.filter(
        workspace=workspace, started_by__kind="full", agent__kind="main"
    ).select_related("started_by", "session")
    if filters.task_type:
        runs = runs.filter(task_type=filters.task_type)
    prompts = dict(OperatorPrompt.objects.values_list("call_id", "text"))
    corrections, results, matches = [], [], []
    excluded: dict[str, int] = {}
    for run in sorted(runs, key=lambda r: r.pk):
        calls = Call.objects.filter(
            agent_id=run.agent_id,
            session_index__gte=run.first_call_index,
            session_index__lte=run.last_call_index,
        ).order_by("agent_index")
        for step, call in enumerate(calls[:MAX_STEP], start=1):
            if call.prompt_kind == "operator":
                prompt = prompts.get(call.pk)
                found = matcher.match(prompt) if prompt is not None else None
                corrections.append((run.pk, step, found is not None))
                if found is not None and len(matches) < MAX_MATCHES:
                    labels = {"trigger": run.started_by.trigger, "task_type": run.task_type}
                    matches.append(_match_row(prompt, found, run.pk, labels, run.session_id,
                                              call.session_index, step))  # fmt: skip
            elif call.prompt_kind:
                excluded[call.prompt_kind] = excluded.get(call.prompt_kind, 0) + 1
            if run.session.harness == "claude-code":
                results += [(run.pk, step, True)] * call.tool_errors
                results += [(run.pk, step, False)] * (call.tool_results - call.tool_errors)
    matches.sort(key=lambda m: (m["session"], m["call_index"]))

    def obs(rows):
        rows = sorted(rows)
        return Observations(np.array([r[0] for r in rows], np.int64),
                            np.array([r[1] for r in rows], np.int64),
                            np.array([r[2] for r in rows], bool))  # fmt: skip

    corpus = Corpus(obs(corrections), obs(results),
                    {r.pk: r.task_type for r in runs}, {r.pk: r.started_by.trigger for r in runs},
                    matches, dict(sorted(excluded.items())), sum(h for _, _, h in corrections))  # fmt: skip
    return post_compaction(corpus, phrase_version=0, bootstrap=200)


def fast_section(workspace, filters=ALL) -> dict:
    """The job's section, recomputed from its corpus with the reference's bootstrap size."""
    section = post_compaction_section(workspace=workspace, filters=filters)
    phrases = section["phrases"]
    matcher = PhraseMatcher(phrases)
    rematched = Rematched(matcher.key)
    corpus = corpus_load(workspace=workspace, filters=filters, matcher=matcher, rematched=rematched)
    assert rematched.calls == []  # the job stored every match it made
    return post_compaction(corpus, phrase_version=0, bootstrap=200)


def _stored(workspace) -> dict[int, tuple[int | None, int | None]]:
    """(phrase index, key) stored with each operator call of the workspace."""
    return {
        pk: (phrase, key)
        for pk, phrase, key in Call.objects.filter(
            workspace=workspace, prompt_kind="operator"
        ).values_list("pk", "correction_phrase", "correction_key")
    }


def _expected(workspace, phrases) -> dict[int, int]:
    """Each operator call's prompt matched here, row by row (−1: none or no prompt)."""
    matcher = PhraseMatcher(phrases)
    texts = dict(OperatorPrompt.objects.values_list("call_id", "text"))
    index = {phrase: k for k, phrase in enumerate(matcher.phrases)}
    expected = {}
    for pk in Call.objects.filter(workspace=workspace, prompt_kind="operator").values_list(
        "pk", flat=True
    ):
        found = matcher.match(texts[pk]) if pk in texts else None
        expected[pk] = -1 if found is None else index[found[0]]
    return expected


def test_fast_path_equals_the_straightforward_computation(workspace, generated, other_workspace):
    _ingest(other_workspace, range(3), random.Random(5))  # never read for `workspace`
    reference = reference_section(workspace, DEFAULT_PHRASES)
    # The corpus has what each shape is there for.
    assert reference["compactions"] > 40
    assert reference["operator_messages"] > 300 and reference["tool_results"] > 300
    assert reference["matches_total"] > 50
    assert any(row["n"] for row in [reference["baseline"]["correction"]])
    steps = [m["step"] for m in reference["matches"]]
    assert max(steps) <= MAX_STEP and min(steps) == 1
    assert set(reference["excluded_messages"]) >= {"command"}
    assert Call.objects.filter(workspace=workspace, is_sidechain=True).exists()

    # Ingest stored every operator prompt's match under the default list: nothing is
    # matched again, and the section equals the reference.
    default_key = PhraseMatcher(DEFAULT_PHRASES).key
    assert _stored(workspace) == {
        pk: (phrase, default_key) for pk, phrase in _expected(workspace, DEFAULT_PHRASES).items()
    }
    assert not Call.objects.exclude(prompt_kind="operator").exclude(correction_key=None).exists()
    assert fast_section(workspace) == reference

    # Stale matches: some made under another list, some never made (a database from
    # before they were stored), with prompts that now match otherwise (edited in place);
    # and a new session. Only the stale ones are matched again, then stored.
    observed = observed_calls(workspace=workspace, filters=ALL)[1]["id"].tolist()
    prompts = OperatorPrompt.objects.filter(call_id__in=observed).order_by("call_id")
    corrected = list(
        prompts.filter(text__startswith="No, that").values_list("call_id", flat=True)[:5]
    )
    plain = list(
        prompts.filter(text__startswith="Now update").values_list("call_id", flat=True)[:5]
    )
    assert len(corrected) == len(plain) == 5
    OperatorPrompt.objects.filter(call_id__in=corrected).update(text="Carry on, thanks.")
    OperatorPrompt.objects.filter(call_id__in=plain).update(text="Please revert that.")
    Call.objects.filter(pk__in=corrected).update(correction_key=12345)
    Call.objects.filter(pk__in=plain).update(correction_key=None, correction_phrase=None)
    _ingest(workspace, range(10, 13), generated)
    edited = reference_section(workspace, DEFAULT_PHRASES)
    assert edited != reference
    assert fast_section(workspace) == edited
    stored = _stored(workspace)
    assert all(stored[pk] == (-1, default_key) for pk in corrected)
    assert all(stored[pk][0] >= 0 and stored[pk][1] == default_key for pk in plain)

    # By task type: the filtered section from the same stored matches.
    for task_type in sorted(edited["by_task_type"]):
        filters = AnalyticsFilters(task_type=task_type)
        assert fast_section(workspace, filters) == reference_section(
            workspace, DEFAULT_PHRASES, filters
        )

    # Another phrase list: another key; every observed prompt is matched again, stored
    # under it, and later ingests store matches under it.
    correction_phrases_save(workspace=workspace, phrases=["carry on", "revert"], actor=None)
    other = reference_section(workspace, ["carry on", "revert"])
    assert other["matches_total"] > 0 and other != edited
    assert fast_section(workspace) == other
    new_key = PhraseMatcher(["carry on", "revert"]).key
    observed = {pk: phrase for pk, (phrase, key) in _stored(workspace).items() if key == new_key}
    assert len(observed) >= other["operator_messages"]
    assert set(observed.values()) == {-1, 0, 1}
    expected = _expected(workspace, ["carry on", "revert"])
    assert all(expected[pk] == phrase for pk, phrase in observed.items())
    before = set(_stored(workspace))
    _ingest(workspace, range(13, 15), generated)
    fresh = {pk: v for pk, v in _stored(workspace).items() if pk not in before}
    assert fresh and all(key == new_key for _, key in fresh.values())
    assert {pk: phrase for pk, (phrase, _) in fresh.items()} == {
        pk: expected_phrase
        for pk, expected_phrase in _expected(workspace, ["carry on", "revert"]).items()
        if pk in fresh
    }
    assert fast_section(workspace) == reference_section(workspace, ["carry on", "revert"])


def _first_agent_positions(workspace) -> dict[int, tuple[int | None, int]]:
    """Per run: its stored first_agent_index, and the agent_index of its first call
    (found here from the calls: the agent's call at the run's first session position)."""
    first = {
        (agent, index): position
        for agent, index, position in Call.objects.filter(workspace=workspace).values_list(
            "agent_id", "session_index", "agent_index"
        )
    }
    return {
        pk: (stored, first[(agent, start)])
        for pk, agent, start, stored in Run.objects.filter(workspace=workspace).values_list(
            "id", "agent_id", "first_call_index", "first_agent_index"
        )
    }


def _assert_steps_stored(workspace) -> None:
    positions = _first_agent_positions(workspace)
    assert positions and all(stored == found for stored, found in positions.values())


def test_steps_stored_at_derive_time_follow_later_lines(workspace, other_workspace):
    """The step facts (`Run.first_agent_index`) are written by derivation and rewritten
    when a session is derived again: its later lines, holding new compactions, arrive in a
    second file. The section equals the straightforward one at each stage; runs stored
    without the fact (a database before migration 0015) give the same section, and the
    fill fills them as derivation would."""
    from traces.derive import runs_fill_first_agent_index

    rng = random.Random(77)
    halves = []
    for number, segments, sidechains in [(40, [6, 9, 30, 4], True), (41, [20, 7, 5], False),
                                         (42, [12], False)]:  # fmt: skip
        lines = _transcript(number, rng, segments, sidechains).splitlines(keepends=True)
        cut = len(lines) // 3  # before the second compaction of each
        halves.append((number, b"".join(lines[:cut]), b"".join(lines[cut:])))
    _ingest(other_workspace, range(3), random.Random(6))
    for number, head, _ in halves:
        ingest_bytes(workspace=workspace, name=f"head{number}.jsonl", data=head, source="demo",
                     refresh_analytics=False)  # fmt: skip
    _assert_steps_stored(workspace)
    before = {pk: stored for pk, (stored, _) in _first_agent_positions(workspace).items()}
    assert fast_section(workspace) == reference_section(workspace, DEFAULT_PHRASES)

    for number, _, tail in halves:
        ingest_bytes(workspace=workspace, name=f"tail{number}.jsonl", data=tail, source="demo",
                     refresh_analytics=False)  # fmt: skip
    _assert_steps_stored(workspace)
    after = _first_agent_positions(workspace)
    assert len(after) > len(before)  # the later compactions started new runs
    reference = reference_section(workspace, DEFAULT_PHRASES)
    assert reference["compactions"] >= 5 and reference["operator_messages"] > 20
    assert fast_section(workspace) == reference
    for task_type in sorted(reference["by_task_type"]):
        filters = AnalyticsFilters(task_type=task_type)
        assert fast_section(workspace, filters) == reference_section(
            workspace, DEFAULT_PHRASES, filters
        )

    # Runs stored before the fact existed: read from their first call, then filled.
    Run.objects.filter(workspace=workspace).update(first_agent_index=None)
    assert fast_section(workspace) == reference
    assert runs_fill_first_agent_index(workspace_id=workspace.pk) == len(after)
    _assert_steps_stored(workspace)
    # The other workspace's runs were neither read nor filled; its own section is its own.
    _assert_steps_stored(other_workspace)
    assert fast_section(other_workspace) == reference_section(other_workspace, DEFAULT_PHRASES)
