"""The pure rules of the join and the reconciliation: which ids a call key holds, when two
compaction reports are the same compaction, and what counts as a disagreement."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from traces.analysis.reconciliation import CallSources, SourceCounts, reconcile
from traces.ingest.joins import COMPACTION_WINDOW, _same_compaction, key_ids
from traces.models import Compaction

T = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("key", "ids"),
    [
        ("msg_01ABCDEFGH:req_011CSkYz", {"msg_01ABCDEFGH", "req_011CSkYz"}),
        ("response:thread-0001:resp_0123456789", {"resp_0123456789"}),
        ("req_011CSkYzZmrLKTfC", set()),  # a span's key: matched as a whole, not by parts
        ("line:main:12", set()),  # no id in it
    ],
)
def test_key_ids(key, ids):
    assert key_ids(key) == ids


def compaction(seconds=0, trigger="auto", pre=150_000):
    return Compaction(timestamp=T + timedelta(seconds=seconds), trigger=trigger, pre_tokens=pre)


@pytest.mark.parametrize(
    ("other", "same"),
    [
        ((T + timedelta(seconds=30), "auto", 148_000), True),
        ((T + COMPACTION_WINDOW, "auto", None), True),
        ((T + COMPACTION_WINDOW + timedelta(seconds=1), "auto", None), False),
        ((T, "manual", 150_000), False),
        ((T, "unknown", 150_000), True),
        ((T, "auto", 120_000), False),  # 20 % apart: another compaction
        ((None, "auto", 150_000), False),
    ],
)
def test_same_compaction(other, same):
    assert _same_compaction(compaction(), *other) is same


def counts(source, key="k", **values):
    return SourceCounts(source, key, T, values, cost_usd=values.pop("cost", None))


def test_disagreements_single_sources_and_totals():
    agree = CallSources(1, "m1:r1", 0, T)
    agree.sources = {
        "transcript": counts("transcript", input_tokens=3, output_tokens=40),
        "event": counts("event", input_tokens=3, output_tokens=40, cost_usd=None),
    }
    differ = CallSources(2, "m2:r2", 1, T)
    differ.sources = {
        "transcript": counts("transcript", input_tokens=4, cache_read_tokens=9, output_tokens=50),
        "span": counts("span", input_tokens=4, cache_read_tokens=9, output_tokens=51),
        # An event without a cache read count is not compared on it.
        "event": counts("event", input_tokens=5, cache_read_tokens=None, output_tokens=50),
    }
    alone = CallSources(3, "m3:r3", 2, T)
    alone.sources = {"transcript": counts("transcript", output_tokens=7)}
    orphan = CallSources(None, "r9", None, T)
    orphan.sources = {
        "event": SourceCounts("event", "r9", T, {"output_tokens": 1}, "", Decimal("0.5"))
    }
    result = reconcile([agree, differ, alone, orphan])
    assert result.calls == 4 and result.joined == 2 and result.disagreeing_calls == 1
    assert [(d.call_id, d.field, d.values) for d in result.disagreements] == [
        (2, "input_tokens", {"transcript": 4, "span": 4, "event": 5}),
        (2, "output_tokens", {"transcript": 50, "span": 51, "event": 50}),
    ]
    assert [(s.call_id, s.source) for s in result.single_source] == [
        (3, "transcript"),
        (None, "event"),
    ]
    assert result.by_source == {"transcript": 3, "event": 3, "span": 1}
    assert result.totals["transcript"]["output_tokens"] == 40 + 50 + 7
    assert result.totals["event"]["output_tokens"] == 40 + 50 + 1
    assert result.cost_usd == {"event": Decimal("0.5")}


def test_one_source_only_lists_nothing_and_lists_are_capped():
    calls = []
    for i in range(5):
        call = CallSources(i, f"m{i}:r{i}", i, T)
        call.sources = {"transcript": counts("transcript", output_tokens=i)}
        calls.append(call)
    result = reconcile(calls)
    assert result.single_source == [] and result.single_source_total == 0
    for call in calls:
        call.sources["event"] = counts("event", output_tokens=call.call_id + 1)
    capped = reconcile(calls, limit=2)
    assert capped.disagreeing_calls == 5 and len(capped.disagreements) == 2 and capped.truncated
