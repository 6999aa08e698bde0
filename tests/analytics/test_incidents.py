"""Incident view: forked starts under a configurable bound, top consumers' and subagents' shares."""

import numpy as np
import pytest

from traces.analysis.incidents import AgentRow, incidents

DAY_1, DAY_2 = "2026-10-01", "2026-10-02"
# agent: (kind, initial context, [(day, tokens billed), …])
FLEET = {
    1: ("main", 200_000, [(DAY_1, 100), (DAY_2, 100)]),
    2: ("subagent", 523_544, [(DAY_1, 300), (DAY_1, 200)]),
    3: ("subagent", 304_404, [(DAY_2, 300)]),
    4: ("subagent", 150_000, [(DAY_2, 150)]),
    5: ("subagent", 30_000, [(DAY_1, 30)]),
    6: ("subagent", 20_000, [(DAY_2, 20)]),
}  # 1,200 tokens in all, 1,000 of them by subagents


def fleet(only=None):
    agents, days, billed, rows = [], [], [], {}
    for agent, (kind, initial, calls) in FLEET.items():
        if only and agent not in only:
            continue
        for day, tokens in calls:
            agents.append(agent)
            days.append(day)
            billed.append(tokens)
        rows[agent] = AgentRow(agent, 1, f"agent {agent}", kind, "", initial, len(calls), sum(t for _, t in calls))  # fmt: skip
    return np.array(agents), np.array(days, dtype=object), np.array(billed, dtype=float), rows


def test_top_consumers_their_share_and_the_subagent_share():
    result = incidents(*fleet(), top_n=2)
    assert result.total_tokens == 1_200 and result.agents == 6
    assert result.days == [DAY_1, DAY_2] and result.day_totals == [630, 570]
    assert [(t["agent"], t["tokens"], t["per_day"]) for t in result.top] == [
        (2, 500, [500, 0]),
        (3, 300, [0, 300]),
    ]
    assert [t["share"] for t in result.top] == [pytest.approx(500 / 1_200), pytest.approx(0.25)]
    assert result.top_share == pytest.approx(800 / 1_200)
    assert result.subagent_share == pytest.approx(1_000 / 1_200)
    assert result.message == "" and result.top_share_note == ""


@pytest.mark.parametrize(
    ("bound", "flagged"),
    [(100_000, [2, 3, 4]), (200_000, [2, 3]), (400_000, [2]), (600_000, [])],
)
def test_forked_starts_follow_the_configurable_bound(bound, flagged):
    # The main thread starts at 200k but is never a fork; subagents above the bound are.
    result = incidents(*fleet(), fork_bound=bound)
    assert [row["agent"] for row in result.forked] == flagged
    assert result.fork_bound == bound
    shares = {row["agent"]: row["share"] for row in result.forked}
    if 2 in shares:
        assert shares[2] == pytest.approx(500 / 1_200)


def test_default_bound_is_100k():
    assert [row["agent"] for row in incidents(*fleet()).forked] == [2, 3, 4]


def test_top_share_is_withheld_when_every_agent_is_in_the_top():
    result = incidents(*fleet(), top_n=10)
    assert len(result.top) == 6 and result.top_share is None
    assert result.top_share_note == (
        "all 6 agents are listed, so a top-10 share is 100% by construction"
    )
    assert result.subagent_share == pytest.approx(1_000 / 1_200)


def test_too_few_agents_draw_nothing_but_still_flag_forks():
    result = incidents(*fleet(only={1, 2, 3, 5}))
    assert result.agents == 4 and result.total_tokens == 1_030
    assert (result.days, result.top, result.top_share, result.subagent_share) == (
        [],
        [],
        None,
        None,
    )
    assert result.message == (
        "Only 4 agents (fewer than 5): too few to say who dominated the spend; tokens per day "
        "and the top consumers' and subagents' shares are not drawn."
    )
    assert [row["agent"] for row in result.forked] == [2, 3]
    assert result.forked[0]["share"] == pytest.approx(500 / 1_030)


def test_no_tokens():
    empty = incidents(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), np.zeros(0), {})
    assert empty.message == "No tokens in this selection." and empty.forked == []
