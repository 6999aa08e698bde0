"""compare_limit_values: which values a new limit removes or loosens (pure, no database)."""

from numfmt import tokens as format_tokens
from qualification.analysis.limits import compare_limit_values

BASE = {
    "max_context_tokens": 32000,
    "max_initial_assembly_tokens": 24000,
    "reserve_tokens": 8000,
    "reserve_action": "compact",
    "source_limits": {"system": 3000, "history": 6000, "memory": 1000},
    "stage_budgets": [
        {"key": "plan", "label": "Plan", "max_tokens": 12000, "target_tokens": None, "action": ""},
        {"key": "code", "label": "Code", "max_tokens": 20000, "target_tokens": 15000,
         "action": "split_change"},
    ],
}  # fmt: skip


def changed(**values) -> dict:
    return {**BASE, **values}


def texts(before, after, *, flagged_only=True) -> list[str]:
    return [c.text for c in compare_limit_values(before, after) if c.flagged or not flagged_only]


def test_the_same_values_change_nothing():
    assert compare_limit_values(BASE, dict(BASE)) == []


def test_dropping_every_stage_and_two_sources_names_each_one():
    after = changed(source_limits={"system": 3000}, stage_budgets=[])
    changes = compare_limit_values(BASE, after)
    assert [(c.kind, c.field, c.before, c.after) for c in changes] == [
        ("removed", "source_limits.history", 6000, None),
        ("removed", "source_limits.memory", 1000, None),
        ("removed", "stage_budgets.plan", 12000, None),
        ("removed", "stage_budgets.code", 20000, None),
    ]
    assert all(c.flagged for c in changes)
    assert changes[2].text == f"removed: stage `plan` budget {format_tokens(12000)}"
    assert changes[0].text == f"removed: source `history` limit {format_tokens(6000)}"


def test_a_higher_ceiling_is_loosened_and_shows_old_and_new():
    after = changed(
        max_initial_assembly_tokens=26000,
        source_limits={**BASE["source_limits"], "history": 9000},
        stage_budgets=[{**BASE["stage_budgets"][0], "max_tokens": 16000}, BASE["stage_budgets"][1]],
    )
    assert texts(BASE, after) == [
        f"loosened: maximum initial assembly {format_tokens(24000)} → {format_tokens(26000)}",
        f"loosened: source `history` limit {format_tokens(6000)} → {format_tokens(9000)}",
        f"loosened: stage `plan` budget {format_tokens(12000)} → {format_tokens(16000)}",
    ]


def test_stricter_or_new_values_are_listed_but_not_flagged():
    after = changed(
        max_context_tokens=16000,
        max_initial_assembly_tokens=12000,
        reserve_tokens=4000,
        source_limits={**BASE["source_limits"], "tool_schemas": 2000, "system": 2500},
        stage_budgets=[
            *BASE["stage_budgets"],
            {"key": "review", "max_tokens": 8000, "target_tokens": None, "action": ""},
        ],
    )
    changes = compare_limit_values(BASE, after)
    assert {(c.field, c.kind) for c in changes} == {
        ("max_context_tokens", "tightened"),
        ("max_initial_assembly_tokens", "tightened"),
        ("reserve_tokens", "changed"),  # a quarter of the maximum context, as before
        ("source_limits.system", "tightened"),
        ("source_limits.tool_schemas", "added"),
        ("stage_budgets.review", "added"),
    }
    assert not [c for c in changes if c.flagged]


def test_the_reserve_is_judged_by_its_share_of_the_maximum_context():
    smaller_share = changed(reserve_tokens=4000, max_initial_assembly_tokens=24000)
    (reserve,) = [
        c for c in compare_limit_values(BASE, smaller_share) if c.field == "reserve_tokens"
    ]
    assert (reserve.kind, reserve.flagged) == ("loosened", True)
    assert reserve.text == f"loosened: reserve {format_tokens(8000)} → {format_tokens(4000)}"
    larger_share = changed(reserve_tokens=10000, max_initial_assembly_tokens=22000)
    kinds = {c.field: c.kind for c in compare_limit_values(BASE, larger_share)}
    assert kinds == {"reserve_tokens": "tightened", "max_initial_assembly_tokens": "tightened"}


def test_stage_targets_and_actions():
    code = BASE["stage_budgets"][1]
    no_target = changed(stage_budgets=[BASE["stage_budgets"][0], {**code, "target_tokens": None}])
    assert texts(BASE, no_target) == [f"removed: stage `code` target {format_tokens(15000)}"]
    higher = changed(stage_budgets=[BASE["stage_budgets"][0], {**code, "target_tokens": 18000}])
    assert texts(BASE, higher) == [
        f"loosened: stage `code` target {format_tokens(15000)} → {format_tokens(18000)}"
    ]
    other_action = changed(
        stage_budgets=[BASE["stage_budgets"][0], {**code, "action": ""}], reserve_action="escalate"
    )
    changes = compare_limit_values(BASE, other_action)
    assert [(c.field, c.kind, c.flagged) for c in changes] == [
        ("reserve_action", "changed", False),
        ("stage_budgets.code.action", "changed", False),
    ]
    assert (
        changes[0].text
        == "changed: action when the reserve is exhausted Compact the context → Escalate to a human"
    )


def test_a_first_limit_against_an_empty_one_only_adds():
    empty = {"source_limits": {}, "stage_budgets": []}
    changes = compare_limit_values(empty, BASE)
    assert {c.kind for c in changes} <= {"added", "changed"} and not any(c.flagged for c in changes)
    assert len([c for c in changes if c.field.startswith("stage_budgets.")]) == 2


def test_as_dict_is_plain_data_for_the_api_and_the_audit_log():
    after = changed(source_limits={"system": 3000, "history": 6000})
    (change,) = compare_limit_values(BASE, after)
    assert change.as_dict() == {
        "field": "source_limits.memory",
        "label": "source `memory` limit",
        "kind": "removed",
        "before": 1000,
        "after": None,
        "flagged": True,
        "text": f"removed: source `memory` limit {format_tokens(1000)}",
    }
