"""Loading columns: compactions and file touches follow the same filters as calls."""

from datetime import date

import numpy as np
import pytest

from traces.analytics.selectors import AnalyticsFilters, load
from traces.models import Call, Compaction, FileTouch, Run

pytestmark = pytest.mark.django_db

DAY_1, DAY_2 = date(2026, 10, 1), date(2026, 10, 2)  # the generated corpus spans these two


def ended_run_type(compaction, runs_by_agent) -> str:
    for run in runs_by_agent[compaction.agent_id]:
        if run.first_call_index <= compaction.before_call_index <= run.last_call_index:
            return run.task_type
    return "unclassified"


def expected(workspace, *, day=None, task_type=None):
    """(sorted pre-compaction sizes, number of touches) selected through the ORM, independently."""
    runs = {}
    for run in Run.objects.filter(workspace=workspace).order_by("agent_id", "index"):
        runs.setdefault(run.agent_id, []).append(run)
    run_type = {(r.agent_id, r.index): r.task_type for rs in runs.values() for r in rs}
    calls = Call.objects.filter(workspace=workspace)
    if day:
        calls = calls.filter(timestamp__date=day)
    calls = set(calls.values_list("agent_id", "session_index"))
    compactions = Compaction.objects.filter(workspace=workspace, kind="full")
    if day:
        compactions = compactions.filter(timestamp__date=day)
    pre = sorted(
        k.pre_tokens for k in compactions if not task_type or ended_run_type(k, runs) == task_type
    )
    touches = [
        t
        for t in FileTouch.objects.filter(workspace=workspace)
        if (t.agent_id, t.call_index) in calls
        and (not task_type or run_type[(t.agent_id, t.run_index)] == task_type)
    ]
    return pre, len(touches)


@pytest.mark.parametrize(
    ("day", "task_type"),
    [
        (DAY_1, ""),
        (DAY_2, ""),
        (None, "building"),
        (None, "code_understanding"),
        (DAY_2, "building"),
    ],
)
def test_compactions_and_touches_follow_the_date_and_task_type_filters(
    corpus, workspace, day, task_type
):
    corpus()
    everything = load(workspace, AnalyticsFilters())
    filters = AnalyticsFilters(
        started_after=day.isoformat() if day else "",
        started_before=day.isoformat() if day else "",
        task_type=task_type,
    )
    data = load(workspace, filters)
    pre, touches = expected(workspace, day=day, task_type=task_type)
    assert 0 < len(pre) < len(everything.compactions)
    assert sorted(data.compactions.pre.tolist()) == pre
    assert 0 < touches < len(everything.touches.agent)
    assert len(data.touches.agent) == touches
    if task_type:
        assert set(data.compactions.task_type.tolist()) == {task_type}


def test_the_two_days_partition_calls_compactions_and_touches(corpus, workspace):
    corpus()
    days = [
        load(workspace, AnalyticsFilters(started_after=d.isoformat(), started_before=d.isoformat()))
        for d in (DAY_1, DAY_2)
    ]
    whole = load(workspace, AnalyticsFilters())
    assert sum(len(d.calls) for d in days) == len(whole.calls) == Call.objects.count()
    assert sum(len(d.compactions) for d in days) == len(whole.compactions)
    assert sum(len(d.touches.agent) for d in days) == len(whole.touches.agent)
    assert Call.objects.filter(timestamp__date=DAY_1).count() == len(days[0].calls) > 0
    # From DAY_2 on (open end) equals DAY_2 alone: the start bound includes its whole day.
    after = load(workspace, AnalyticsFilters(started_after=DAY_2.isoformat()))
    assert len(after.calls) == len(days[1].calls)


@pytest.mark.parametrize(
    ("field", "value", "matches"),
    [
        ("project", "web_app", [0]),  # any case; "_" is literal
        ("project", "WEB-APP", [1]),
        ("project", "100%", [2]),  # "%" is literal
        ("project", "\\dev", [3]),  # the escape character is literal
        ("model", "claude-Opus-4-1", [0, 2]),  # whole names (the form checks them)
        ("model", "claude-opus-4-1", []),  # the selector takes the name as the form gives it
    ],
)
def test_text_filters_match_the_sessions_list(named_sessions, workspace, field, value, matches):
    """Case-insensitive, with %, _ and \\ literal, on SQLite and PostgreSQL alike."""
    data = load(workspace, AnalyticsFilters(**{field: value}))
    assert sorted(set(data.call_session.tolist())) == sorted(named_sessions[i].pk for i in matches)
    expected_calls = Call.objects.filter(session__in=[named_sessions[i] for i in matches]).count()
    assert len(data.calls) == expected_calls


@pytest.mark.postgres
def test_columns_streamed_in_many_blocks_equal_one_block(corpus, workspace, monkeypatch):
    """COPY text is parsed a block at a time; block edges must not change any column."""
    from dataclasses import fields

    from traces.analytics.selectors import loading

    corpus(sessions=3)
    filters = AnalyticsFilters(started_after=DAY_1.isoformat(), model="claude-sonnet-4-5")
    whole = load(workspace, filters)
    monkeypatch.setattr(loading, "COPY_BLOCK_BYTES", 1_000)  # dozens of blocks per table
    blocks = load(workspace, filters)
    assert len(whole.calls) > 300 and len(whole.touches.agent) > 100
    for name in ("calls", "compactions", "touches"):
        for column in fields(getattr(whole, name)):
            expected = getattr(getattr(whole, name), column.name)
            got = getattr(getattr(blocks, name), column.name)
            same = np.array_equal(got, expected, equal_nan=expected.dtype.kind == "f")
            assert got.dtype == expected.dtype and same, (name, column)
    assert np.array_equal(blocks.call_session, whole.call_session)
    assert np.array_equal(blocks.call_task_type, whole.call_task_type)
    assert blocks.agents == whole.agents


def test_what_if_is_the_model_the_page_and_the_api_both_show():
    from traces.analysis.cycle import CycleInputError, CycleParams, evaluate
    from traces.analytics.selectors import what_if

    seed = {"post_compaction_tokens": 65_588, "growth_per_step": 1_470, "summary_tokens": 4_382}
    plain = what_if(**seed, penalty_steps=28, thresholds=[232_000])
    expected_model = evaluate(CycleParams(65_588, 1_470, 4_382, 28), thresholds=[232_000])
    assert plain.model.as_dict() == expected_model.as_dict()
    assert (plain.tail, plain.exchange, plain.sensitivity) == (None, None, None)

    full = what_if(
        **seed, penalty_steps=28, tail_tokens=60_000, tail_penalty_steps=14,
        compare=(232_000, 600_000), penalties=[0, 28, 40],
    )  # fmt: skip
    assert full.tail["penalty_steps"] == 14
    assert full.tail["model"] == evaluate(CycleParams(125_588, 1_470, 4_382, 14)).as_dict()
    assert full.exchange is not None and full.exchange_error is None
    assert [row["penalty_steps"] for row in full.sensitivity] == [0, 28, 40]

    with pytest.raises(CycleInputError) as caught:
        what_if(**seed, penalty_steps=28, tail_tokens=10**9)
    assert caught.value.field == "tail_tokens"


def test_exclude_forks_drops_forked_agents_from_every_analysis(corpus, workspace):
    from traces.models import Agent

    corpus(sessions=4, fork_share=0.4)
    forks = set(
        Agent.objects.filter(workspace=workspace, start_kind="fork").values_list("id", flat=True)
    )
    assert forks  # the corpus has forked subagents
    everything = load(workspace, AnalyticsFilters())
    fresh = load(workspace, AnalyticsFilters(exclude_forks=True))
    assert forks <= set(everything.calls.agent.tolist())
    assert not forks & set(fresh.calls.agent.tolist())
    assert not forks & set(fresh.agents) and not forks & set(fresh.touches.agent.tolist())
    assert not forks & set(fresh.compactions.agent.tolist())
    kept = ~np.isin(everything.calls.agent, list(forks))
    assert len(fresh.calls) == int(kept.sum())
    assert AnalyticsFilters(exclude_forks=True).describe() == "forked starts excluded"
