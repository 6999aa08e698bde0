"""Pure analysis: kappa against published worked examples, run agreement, resolution, bands,
the median interval, the lab comparison and step building. No database."""

import math
from datetime import UTC, datetime

import pytest

from traces.annotations.analysis import aggregates
from traces.annotations.analysis.aggregates import MarkPoint, by_band, compare_with_lab
from traces.annotations.analysis.agreement import (
    Rating,
    kappa_for_items,
    landis_koch,
    run_agreement,
    step_agreement,
)
from traces.annotations.analysis.steps import StepRow, build_step, full_part, segments

# --- kappa -------------------------------------------------------------------


def cohen_wikipedia_items():
    """Wikipedia's Cohen's kappa example: 50 grant proposals read by A and B. Both say yes
    to 20, A yes / B no 5, A no / B yes 10, both no 15; p_o = 0.7, p_e = 0.5, κ = 0.4."""
    cells = [("yes", "yes", 20), ("yes", "no", 5), ("no", "yes", 10), ("no", "no", 15)]
    return [{"A": a, "B": b} for a, b, count in cells for _ in range(count)]


def test_cohens_kappa_matches_the_published_example():
    result = kappa_for_items(cohen_wikipedia_items())
    assert result.method == "cohen"
    assert result.kappa == pytest.approx(0.4)
    assert result.observed_agreement == pytest.approx(0.7)
    assert (result.items, result.raters, result.excluded_items) == (50, 2, 0)
    # Asymptotic SE from statsmodels (0.12700): 0.4 ± 1.95996 · 0.12700.
    assert result.ci_low == pytest.approx(0.1511, abs=1e-3)
    assert result.ci_high == pytest.approx(0.6489, abs=1e-3)
    assert result.interpretation == "fair"


FLEISS_1971 = [  # Wikipedia's Fleiss' kappa example: 10 subjects, 14 raters, 5 categories
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_matches_the_published_example():
    items = []
    for row_number, row in enumerate(FLEISS_1971):
        labels = [f"c{c}" for c, count in enumerate(row) for _ in range(count)]
        # Different raters per subject: Fleiss' kappa does not need the same raters.
        items.append({f"r{(row_number * 3 + i) % 20}": label for i, label in enumerate(labels)})
    result = kappa_for_items(items)
    assert result.method == "fleiss"
    assert result.kappa == pytest.approx(0.210, abs=5e-4)  # published κ = 0.210
    assert result.observed_agreement == pytest.approx(0.378, abs=5e-4)  # published P̄ = 0.378
    assert result.ratings_per_item == 14 and result.items == 10
    assert result.ci_low < result.kappa < result.ci_high
    assert "bootstrap" in result.ci_method
    assert landis_koch(result.kappa) == "fair"


def test_three_annotators_use_fleiss_and_items_with_other_counts_are_excluded():
    items = [
        {"ann": "repetition", "bob": "repetition", "cy": "repetition"},
        {"ann": "retrieval_failure", "bob": "repetition", "cy": "retrieval_failure"},
        {"ann": "none", "bob": "none", "cy": "retrieval_failure"},
        {"ann": "none", "bob": "none"},  # one rating missing: not used
    ]
    result = kappa_for_items(items)
    assert result.method == "fleiss" and result.items == 3 and result.excluded_items == 1
    # By hand: P_i = 1, 1/3, 1/3, so P̄ = 5/9; over the 9 ratings the category shares are
    # repetition 4/9, retrieval_failure 3/9, none 2/9.
    p_bar = (1 + 1 / 3 + 1 / 3) / 3
    p_e = (4 / 9) ** 2 + (3 / 9) ** 2 + (2 / 9) ** 2
    assert result.kappa == pytest.approx((p_bar - p_e) / (1 - p_e))


def test_kappa_is_undefined_when_every_rating_is_the_same():
    result = kappa_for_items([{"a": "repetition", "b": "repetition"}] * 4)
    assert result.kappa is None and result.observed_agreement == 1.0
    assert "undefined" in result.reason


def test_degenerate_tables_report_an_undefined_interval_not_a_zero_width_one():
    perfect = kappa_for_items([{"a": "x", "b": "x"}] * 5 + [{"a": "y", "b": "y"}] * 5)
    assert perfect.kappa == 1.0
    assert (perfect.ci_low, perfect.ci_high) == (None, None)
    assert perfect.ci_method.startswith("undefined")
    one_sided = kappa_for_items([{"a": "x", "b": "x"}] * 5 + [{"a": "x", "b": "y"}] * 5)
    assert one_sided.kappa is None and "undefined" in one_sided.reason
    fleiss = kappa_for_items(
        [{"a": "x", "b": "x", "c": "x"}] * 5 + [{"a": "y", "b": "y", "c": "y"}] * 5
    )
    assert fleiss.method == "fleiss" and fleiss.kappa == 1.0
    assert (fleiss.ci_low, fleiss.ci_high) == (None, None)
    assert fleiss.ci_method.startswith("undefined")


def test_kappa_needs_two_rated_items():
    result = kappa_for_items([{"a": "repetition", "b": "other"}])
    assert result.kappa is None and "at least two items" in result.reason


# --- one run ----------------------------------------------------------------


def test_run_agreement_within_window_and_class():
    marks = [Rating("a", 40, "repetition"), Rating("b", 43, "repetition")]
    assert run_agreement(marks, window=3).agrees
    assert not run_agreement(marks, window=2).within_window
    assert not run_agreement(marks, window=3).same_step
    three = run_agreement(
        [Rating("a", 10, "repetition"), Rating("b", 12, "repetition"), Rating("c", 14, "other")],
        window=3,
    )
    assert three.step_spread == 4 and not three.within_window  # pairwise: 10 and 14 are 4 apart
    assert three.majority_class == "repetition" and not three.same_class
    mixed = run_agreement([Rating("a", 5, "repetition"), Rating("b", None, "none")])
    assert not mixed.within_window and mixed.majority_class is None


def test_step_agreement_counts_items_with_two_marked_steps():
    runs = [
        [Rating("a", 10, "x"), Rating("b", 10, "x")],
        [Rating("a", 10, "x"), Rating("b", 12, "y")],
        [Rating("a", 10, "x"), Rating("b", 30, "x")],
        [Rating("a", 10, "x"), Rating("b", None, "none")],  # not counted
        [Rating("a", 10, "x")],  # not counted
    ]
    result = step_agreement(runs, window=3)
    assert (result.items, result.same_step, result.within_window) == (3, 1, 2)
    low, high = result.within_window_ci
    assert low < 2 / 3 < high


# --- aggregates ---------------------------------------------------------------


def point(id, run, annotator, step, cls, context, adjudication=False):
    return MarkPoint(id, run, annotator, step, cls, context, "m", adjudication)


def test_resolution_prefers_adjudication_then_unanimity_and_counts_disputes():
    marks = [
        point(1, 100, 1, 50, "repetition", 120_000),  # single mark
        point(2, 200, 1, 10, "retrieval_failure", 30_000),
        point(3, 200, 2, 12, "retrieval_failure", 32_000),  # agrees within 3
        point(4, 300, 1, 10, "retrieval_failure", 30_000),
        point(5, 300, 2, 40, "retrieval_failure", 90_000),  # 30 steps apart: disputed
        point(6, 400, 1, 10, "repetition", 30_000),
        point(7, 400, 2, 10, "other", 30_000),
        point(8, 400, 9, 11, "harness_truncation", 31_000, adjudication=True),
    ]
    resolution = aggregates.resolve(marks, window=3)
    assert [m.id for m in resolution.resolved] == [1, 2, 8]
    assert resolution.disputed_runs == [300]
    assert resolution.how == {"single": 1, "unanimous": 1, "adjudicated": 1}
    assert resolution.runs == 4


def test_classes_by_band_fill_gaps_and_keep_every_class():
    table = by_band(
        [(12_000, "repetition"), (24_999, "repetition"), (80_000, "retrieval_failure")],
        width=25_000,
    )
    assert [b.label for b in table.bands] == ["0–25k", "25k–50k", "50k–75k", "75k–100k"]
    assert [b.n for b in table.bands] == [2, 0, 0, 1]
    assert table.bands[0].counts["repetition"] == 2
    assert set(table.bands[0].counts) == set(table.classes) and len(table.classes) == 10
    assert table.class_totals()["retrieval_failure"] == 1 and table.n == 3
    assert by_band([], width=10_000).bands == []


def test_median_interval_uses_order_statistics():
    values = list(range(10, 110, 10))  # 10 … 100
    (low, high), coverage = aggregates.median_interval(values)
    assert (low, high) == (20, 90)  # x(2), x(9) for n = 10
    assert coverage == pytest.approx(1 - 2 * 11 / 1024)
    assert aggregates.median_interval([1, 2, 3, 4, 5]) is None  # n = 5 cannot reach 95%
    (low6, high6), cov6 = aggregates.median_interval([1, 2, 3, 4, 5, 6])
    assert (low6, high6) == (1, 6) and cov6 == pytest.approx(1 - 2 / 64)


def test_lab_comparison_says_plainly_when_production_diverges_earlier():
    contexts = [30_000, 35_000, 38_000, 40_000, 41_000, 44_000, 45_000, 47_000, 50_000, 52_000]
    earlier = compare_with_lab(contexts, ecl_tokens=64_000, knee_tokens=128_000, family="code")
    assert earlier.verdict == "earlier"
    assert earlier.statement.startswith("Production diverges earlier than the lab predicted")
    assert "n = 10 runs" in earlier.statement and "ECL of 64k" in earlier.statement
    assert "10 of 10 runs diverged below it (100%, 95% CI 72%–100%)" in earlier.statement
    assert earlier.below_reference == 10
    consistent = compare_with_lab(contexts, ecl_tokens=42_000, knee_tokens=None, family="code")
    assert consistent.verdict == "consistent"
    inconclusive = compare_with_lab(contexts, ecl_tokens=50_000, knee_tokens=None, family="code")
    assert inconclusive.verdict == "inconclusive"  # median 42.5k < 50k but CI reaches 50k
    beyond = compare_with_lab(contexts, ecl_tokens=16_000, knee_tokens=None, family="code")
    assert beyond.verdict == "consistent" and "0 of 10 runs diverged below it" in beyond.statement
    by_knee = compare_with_lab(contexts, ecl_tokens=None, knee_tokens=128_000, family="code")
    assert by_knee.reference_kind == "knee" and by_knee.verdict == "earlier"
    few = compare_with_lab(contexts[:4], ecl_tokens=64_000, knee_tokens=None, family="code")
    assert few.verdict == "insufficient" and "n = 4" in few.statement
    none = compare_with_lab(contexts, ecl_tokens=None, knee_tokens=None, family="code")
    assert none.verdict == "no_reference"


# --- steps ----------------------------------------------------------------


def test_segments_split_code_fences_and_keep_markup_as_text():
    parts = segments("Run this:\n```bash\npytest -q\n```\nthen <script>alert(1)</script>")
    assert [(p.kind, p.lang) for p in parts] == [("text", ""), ("code", "bash"), ("text", "")]
    assert parts[1].text == "pytest -q"
    assert parts[2].text == "then <script>alert(1)</script>"  # escaping is the template's job
    unclosed = segments("```\nx = 1")
    assert unclosed == [aggregates_segment("code", "x = 1")]


def aggregates_segment(kind, text, lang=""):
    from traces.annotations.analysis.steps import Segment

    return Segment(kind, text, lang)


def test_build_step_previews_results_links_spawns_and_serves_full_parts():
    long_result = "\n".join(f"line {i}" for i in range(200))
    text = {
        "prompt": "Fix the bug",
        "blocks": [
            {"type": "thinking", "text": "Let me look"},
            {"type": "text", "text": "I will read the file."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a.py"}},
            {"type": "tool_use", "id": "t2", "name": "Task", "input": {"description": "survey"}},
        ],
        "results": {
            "t1": {"content": long_result, "is_error": False, "truncated_chars": 5},
            "t2": {"content": "done", "is_error": True, "truncated_chars": 0},
        },
    }
    row = StepRow(
        7, 3, datetime(2026, 1, 1, tzinfo=UTC), "m", 50_000, 300, 3, 1_200, 48_797, 48_800
    )
    step = build_step(row, text, position=4, spawns={"t2": 99})
    assert step.added == 1_200 and step.position == 4 and step.tool_names == ["Read", "Task"]
    kinds = [b.kind for b in step.blocks]
    assert kinds == ["thinking", "text", "tool_use", "tool_use"]
    read = step.blocks[2].tool
    assert read.summary == "/a.py" and read.spawned_agent is None
    assert read.result.truncated and read.result.text.count("\n") == 9
    assert read.result.hidden_lines == 190 and read.result.upstream_truncated_chars == 5
    task = step.blocks[3].tool
    assert task.spawned_agent == 99 and task.is_error and not task.result.truncated
    assert full_part(text, "result:t1") == long_result
    assert full_part(text, "input:t1") == "file_path: /a.py"
    assert full_part(text, "prompt") == "Fix the bug"
    assert full_part(text, "text:1") == "I will read the file."
    assert full_part(text, "text:0") is None  # block 0 is thinking
    assert full_part(text, "result:nope") is None
    bare = build_step(row, None, position=1)
    assert not bare.has_text and bare.blocks == [] and bare.prompt is None
    first = build_step(StepRow(0, 0, None, "m", 10, 1, 1, 1, 1, None), {}, position=1)
    assert first.added is None


def test_preview_counts_hidden_lines():
    from traces.annotations.analysis.steps import preview

    short = preview("k", "a\nb")
    assert not short.truncated and short.hidden_lines == 0 and short.total_chars == 3
    long = preview("k", "x" * 5000, chars=100)
    assert long.truncated and len(long.text) == 100 and long.hidden_lines == 0
    assert math.isclose(long.total_chars, 5000)


def test_arguments_read_as_sent():
    from traces.annotations.analysis.steps import format_arguments

    text = format_arguments(
        {"command": "pytest -q", "prompt": "line one\nline two", "limit": 5, "flags": ["a"]}
    )
    assert text == 'command: pytest -q\nprompt: |\n  line one\n  line two\nlimit: 5\nflags: ["a"]'
    assert format_arguments(["x", 1]) == '[\n  "x",\n  1\n]'
