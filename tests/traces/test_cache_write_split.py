"""The 5-minute / 1-hour cache-write split, parsed and stored, against an independent
reference counter over generated transcripts: streamed lines of one call, sidechains,
missing request ids, breakdowns absent, zero, malformed or negative."""

import json
import random

import pytest

from tests.traces.factories import claude_assistant
from traces.formats.claude_code import ClaudeCodeParser
from traces.formats.records import CallRecord
from traces.models import Call
from traces.services import ingest_bytes

BREAKDOWNS = ("valid", "valid", "valid", "absent", "zero", "string", "negative", "one-missing")


def generate(seed: int, calls: int = 60):
    """Transcript lines and the reference: {key: (cache writes, 1-hour writes)}."""
    rng = random.Random(seed)
    lines, expected = [], {}
    for n in range(calls):
        msg, req = f"msg_{seed}_{n}", (None if rng.random() < 0.15 else f"req_{seed}_{n}")
        kind = rng.choice(BREAKDOWNS)
        five, hour = rng.randrange(0, 5000), rng.randrange(0, 5000)
        total = rng.randrange(0, 9000)  # cache_creation_input_tokens when no usable breakdown
        sidechain = rng.random() < 0.3
        streamed = rng.randrange(1, 4)  # lines of the same call, output growing
        for part in range(streamed):
            line = json.loads(
                claude_assistant(msg, req, t=n * 10 + part, cc=total, out=10 + part,
                                 sidechain=sidechain, session=f"s{seed}")
            )  # fmt: skip
            usage = line["message"]["usage"]
            if kind == "valid":
                usage["cache_creation"] = {"ephemeral_5m_input_tokens": five,
                                           "ephemeral_1h_input_tokens": hour}  # fmt: skip
                usage["cache_creation_input_tokens"] = five + hour
            elif kind == "zero":
                usage["cache_creation"] = {"ephemeral_5m_input_tokens": 0,
                                           "ephemeral_1h_input_tokens": 0}  # fmt: skip
            elif kind == "string":
                usage["cache_creation"] = {"ephemeral_5m_input_tokens": "12",
                                           "ephemeral_1h_input_tokens": hour}  # fmt: skip
            elif kind == "negative":
                usage["cache_creation"] = {"ephemeral_5m_input_tokens": five,
                                           "ephemeral_1h_input_tokens": -5}  # fmt: skip
            elif kind == "one-missing":
                usage["cache_creation"] = {"ephemeral_1h_input_tokens": hour}
            lines.append(json.dumps(line))
        key = f"{msg}:{req}" if req else msg
        # The reference rule, written out: a breakdown of two non-negative integers with a
        # positive sum is the split; anything else keeps the total with no 1-hour part.
        expected[key] = (five + hour, hour) if kind == "valid" and five + hour else (total, 0)
        if kind == "valid" and not five + hour:
            expected[key] = (0, 0)
    rng.shuffle(lines)  # lines of different calls interleave; a call's own stay in order
    return sorted(lines, key=lambda text: json.loads(text)["timestamp"]), expected


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_parser_splits_cache_writes_as_the_reference_does(seed):
    lines, expected = generate(seed)
    parser = ClaudeCodeParser(f"s{seed}.jsonl")
    calls = [r for r in parser.parse(line.encode() for line in lines) if isinstance(r, CallRecord)]
    got = {c.key: (c.cache_creation_tokens, c.cache_creation_1h_tokens) for c in calls}
    assert got == expected
    assert sum(h for _, h in got.values()) == sum(h for _, h in expected.values())
    assert parser.stats.calls == len(expected) and parser.stats.malformed_lines == 0


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [4, 5])
def test_the_loader_stores_the_split(workspace, seed):
    lines, expected = generate(seed)
    half = len(lines) // 2  # two files: streamed lines of one call may span both
    for name, part in (("a.jsonl", lines[:half]), ("b.jsonl", lines[half:])):
        ingest_bytes(
            workspace=workspace, name=name, data=("\n".join(part) + "\n").encode(),
            source="demo",
        )  # fmt: skip
    stored = dict(
        (key, (total, hour))
        for key, total, hour in Call.objects.filter(workspace=workspace).values_list(
            "key", "cache_creation_tokens", "cache_creation_1h_tokens"
        )
    )
    assert stored == expected
