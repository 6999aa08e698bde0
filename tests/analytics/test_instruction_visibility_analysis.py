"""Instruction visibility, the pure counting: checked against a reference counter written
here from the documented rules, on generated shapes, and on hand-made cases."""

import math
import random
import re

import pytest

from traces.analysis.instruction_visibility import (
    TURN_BINS,
    CallThinking,
    Matcher,
    instruction_visibility,
    normalise,
    without_list_marker,
)

INSTRUCTION = "Never commit directly to main; open a pull request."
WORDS = [
    "the",
    "tests",
    "pass",
    "now",
    "so",
    "I",
    "will",
    "run",
    "the",
    "linter",
    "and",
    "then",
    "look",
    "at",
    "the",
    "diff",
    "again",
]


def reference_normalise(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text).casefold()
    text = re.sub(r"[^\w\s]|_", " ", text)
    return " ".join(text.split())


def reference_wilson(count, n, z=1.959963984540054):
    p = count / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def reference_count(instruction, calls):
    """Per call in the window with non-blank thinking: (session, bin, exact, normalised)."""
    exact_text = instruction.strip()
    norm_text = reference_normalise(instruction)
    rows, outside, blank = [], 0, []
    for c in calls:
        if c.delivered_at is None or c.order < c.delivered_at:
            outside += 1
            continue
        turns = c.order - c.delivered_at
        bin_index = next(
            i for i, (lo, hi) in enumerate(TURN_BINS) if lo <= turns and (hi is None or turns <= hi)
        )
        texts = [t for t in c.thinking if t.strip()]
        if not texts:
            blank.append((c.session, bin_index))
            continue
        joined = "\n".join(texts)
        rows.append(
            (c.session, bin_index, exact_text in joined, norm_text in reference_normalise(joined))
        )
    return rows, outside, blank


def _check_rate(rate, hits, n):
    assert rate["n"] == n
    assert rate["count"] == hits
    if n == 0:
        assert rate["rate"] is None and rate["ci"] is None
        return
    assert rate["rate"] == pytest.approx(hits / n)
    low, high = reference_wilson(hits, n)
    assert rate["ci"][0] == pytest.approx(low, abs=1e-9)
    assert rate["ci"][1] == pytest.approx(high, abs=1e-9)


def _variant(rng):
    """The instruction as a model might restate it: exact, recased, rewrapped, repunctuated."""
    return rng.choice(
        [
            INSTRUCTION,
            INSTRUCTION.upper(),
            INSTRUCTION.replace(" ", "\n  "),
            INSTRUCTION.replace(";", ",").replace(".", ""),
            "**" + INSTRUCTION.replace("main", "`main`") + "**",
            INSTRUCTION.lower().replace(" ", "   "),
        ]
    )


def _filler(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _thinking(rng):
    shape = rng.choice(["none", "blank", "plain", "with", "twice", "split", "many"])
    if shape == "none":
        return ()
    if shape == "blank":
        return ("", "   \n")
    if shape == "plain":
        return (_filler(rng, rng.randint(1, 80)),)
    if shape == "with":
        return (_filler(rng, rng.randint(0, 30)) + " " + _variant(rng) + " " + _filler(rng, 5),)
    if shape == "twice":
        return (_variant(rng) + " and again: " + _variant(rng),)
    if shape == "split":  # the instruction runs over two blocks, split at a space
        words = INSTRUCTION.split(" ")
        at = rng.randint(1, len(words) - 1)
        return (_filler(rng, 3) + " " + " ".join(words[:at]), " ".join(words[at:]))
    return tuple(_filler(rng, rng.randint(0, 20)) for _ in range(rng.randint(2, 5)))


def _generated(seed):
    rng = random.Random(seed)
    calls = []
    for session in range(rng.randint(1, 6)):
        for agent in range(rng.randint(1, 3)):
            length = rng.randint(1, 140)
            delivered = rng.choice([None, 0, rng.randint(0, length)])
            for order in range(length):
                calls.append(CallThinking(session, agent, order, delivered, _thinking(rng)))
    return calls


@pytest.mark.parametrize("seed", range(25))
def test_matches_reference_counter_on_generated_shapes(seed):
    calls = _generated(seed)
    result = instruction_visibility(INSTRUCTION, iter(calls))
    rows, outside, blank = reference_count(INSTRUCTION, calls)

    assert result["calls_outside_window"] == outside
    overall = result["overall"]
    assert overall["calls_without_thinking"] == len(blank)
    _check_rate(overall["exact"], sum(r[2] for r in rows), len(rows))
    _check_rate(overall["normalised"], sum(r[3] for r in rows), len(rows))

    sessions = {row["session"]: row for row in result["by_session"]}
    expected_sessions = {r[0] for r in rows} | {b[0] for b in blank}
    assert set(sessions) == expected_sessions
    for session, row in sessions.items():
        mine = [r for r in rows if r[0] == session]
        assert row["calls_without_thinking"] == sum(1 for b in blank if b[0] == session)
        _check_rate(row["exact"], sum(r[2] for r in mine), len(mine))
        _check_rate(row["normalised"], sum(r[3] for r in mine), len(mine))

    assert [b["turns"] for b in result["by_turns"]] == [list(t) for t in TURN_BINS]
    for index, row in enumerate(result["by_turns"]):
        mine = [r for r in rows if r[1] == index]
        assert row["calls_without_thinking"] == sum(1 for b in blank if b[1] == index)
        _check_rate(row["exact"], sum(r[2] for r in mine), len(mine))
        _check_rate(row["normalised"], sum(r[3] for r in mine), len(mine))


def test_generated_shapes_exercise_every_case():
    """The generator must produce hits, misses and blank thinking, or the test above proves little."""
    calls = [c for seed in range(25) for c in _generated(seed)]
    rows, outside, blank = reference_count(INSTRUCTION, calls)
    assert outside and blank
    exact = sum(r[2] for r in rows)
    normalised = sum(r[3] for r in rows)
    assert 0 < exact < normalised < len(rows)


def test_hand_made_counts():
    calls = [
        CallThinking("s1", "main", 0, 2, (INSTRUCTION,)),  # before delivery
        CallThinking("s1", "main", 1, 2, ()),  # before delivery, no thinking
        CallThinking("s1", "main", 2, 2, ("I must " + INSTRUCTION + " " + INSTRUCTION,)),
        CallThinking("s1", "main", 3, 2, ("never COMMIT directly to main, open a pull-request",)),
        CallThinking("s1", "main", 4, 2, ()),  # no visible thinking
        CallThinking("s1", "main", 5, 2, ("  ",)),  # blank thinking counts as none
        CallThinking(
            "s1", "main", 30, 2, ("Never commit directly to main;", "open a pull request.")
        ),
        CallThinking("s2", "main", 0, None, (INSTRUCTION,)),  # never delivered
        CallThinking("s2", "sub", 0, 0, ("unrelated",)),
    ]
    result = instruction_visibility(INSTRUCTION, calls)
    assert result["calls_outside_window"] == 3
    overall = result["overall"]
    assert (overall["n"], overall["calls_without_thinking"]) == (4, 2)
    assert overall["thinking_blocks"] == 5
    assert (overall["exact"]["count"], overall["normalised"]["count"]) == (1, 3)
    by_session = {r["session"]: r for r in result["by_session"]}
    assert by_session["s1"]["normalised"]["count"] == 3 and by_session["s1"]["n"] == 3
    assert by_session["s2"]["normalised"]["count"] == 0 and by_session["s2"]["n"] == 1
    bins = {r["label"]: r for r in result["by_turns"]}
    assert bins["0"]["n"] == 2 and bins["0"]["exact"]["count"] == 1
    assert bins["1–4"]["n"] == 1 and bins["1–4"]["calls_without_thinking"] == 2
    assert bins["20–49"]["normalised"]["count"] == 1 and bins["20–49"]["exact"]["count"] == 0
    assert bins["100+"]["n"] == 0 and bins["100+"]["normalised"]["rate"] is None
    assert result["sessions"] == 2 and result["sessions_delivered"] == 2
    assert result["agents_delivered"] == 2


def test_zero_hits_keep_an_interval():
    calls = [CallThinking(1, 1, i, 0, ("nothing relevant",)) for i in range(20)]
    rate = instruction_visibility(INSTRUCTION, calls)["overall"]["normalised"]
    assert rate["rate"] == 0 and rate["ci"][0] == 0
    assert rate["ci"][1] == pytest.approx(0.161, abs=5e-4)  # Wilson upper bound for 0/20


def test_normalise_rule():
    assert normalise("  **Use `pnpm`**,\n not  NPM! ") == "use pnpm not npm"
    assert normalise("See [the guide](https://x.test/a_b).") == "see the guide"
    assert normalise("snake_case → kebab-case") == "snake case kebab case"
    assert normalise("STRASSE") == normalise("Straße")


def test_matcher_and_empty_instruction():
    matcher = Matcher("Run `make lint`.")
    assert matcher.normalised("i should RUN make-lint first") is True
    assert matcher.normalised("running make lint") is False
    assert matcher.in_window(["", "Please run make lint."]) is True
    assert matcher.exact("Please Run `make lint`. now") is True
    with pytest.raises(ValueError, match="no letters or digits"):
        instruction_visibility(" ... ", [])


def test_ledger_text_loses_its_list_marker():
    assert without_list_marker("- Use `pnpm`, not npm.") == "Use `pnpm`, not npm."
    assert (
        without_list_marker("  12. Run tests\n    before pushing")
        == "Run tests\n    before pushing"
    )
    assert without_list_marker("* [x] Done - really") == "Done - really"
    assert without_list_marker("Plain - text") == "Plain - text"


def test_column_counts_equal_call_by_call_counts():
    """`visibility_from_arrays` (the database path's counter) against the call-by-call one,
    on random calls: delivered or not, before and after delivery, with and without thinking."""
    import random

    import numpy as np

    from traces.analysis.instruction_visibility import (
        CallMatch,
        Matcher,
        visibility_from_arrays,
        visibility_from_matches,
    )

    rng = random.Random(18)
    calls = []
    for agent in range(40):
        delivered = rng.choice([None, 0, 3, 30, 120])
        for order in range(rng.choice([1, 5, 60, 200])):
            blocks = rng.choice([0, 0, 1, 2, 3])
            exact = blocks > 0 and rng.random() < 0.2
            normalised = exact or (blocks > 0 and rng.random() < 0.1)
            calls.append(CallMatch(agent % 7, agent, order, delivered, blocks, exact, normalised))
    matcher = Matcher("Never commit directly to main.")
    expected = visibility_from_matches(matcher, calls)
    got = visibility_from_arrays(
        matcher,
        session=[c.session for c in calls],
        agent=[c.agent for c in calls],
        order=[c.order for c in calls],
        delivered_at=[np.nan if c.delivered_at is None else c.delivered_at for c in calls],
        blocks=[c.blocks for c in calls],
        exact=[c.exact for c in calls],
        normalised=[c.normalised for c in calls],
    )
    key = lambda row: row["session"]  # noqa: E731
    assert sorted(got.pop("by_session"), key=key) == sorted(expected.pop("by_session"), key=key)
    assert got == expected
