"""The audit's pure parts: sampling, packets and fractions, against independent computations."""

from __future__ import annotations

import math

import pytest

from traces.audit.analysis import fractions, packets, sampling
from traces.audit.analysis.fractions import JudgedStep
from traces.audit.analysis.packets import CallInput
from traces.audit.analysis.sampling import RunInfo


def runs_fixture():
    runs = []
    for i in range(40):
        task = ["building", "qa"][i % 2]
        median = [20_000, 100_000, 400_000][i % 3]
        runs.append(RunInfo(i + 1, task, median, call_count=10))
    return runs


class TestBands:
    def test_edges_are_half_open(self):
        assert sampling.band_labels() == ["<50k", "50k–150k", "150k–350k", "350k–600k", "≥600k"]
        assert sampling.band_of(49_999) == "<50k"
        assert sampling.band_of(50_000) == "50k–150k"
        assert sampling.band_of(600_000) == "≥600k"
        assert sampling.band_labels((10, 20_000)) == ["<10", "10–20k", "≥20k"]

    def test_strata_counts(self):
        counts = sampling.strata_counts(runs_fixture())
        # i%2 and i%3 cycle with period 6: 40 runs → each of the 6 strata 6 or 7 times.
        assert sum(counts.values()) == 40
        assert counts["building|<50k"] == len([i for i in range(40) if i % 2 == 0 and i % 3 == 0])
        assert counts["qa|350k–600k"] == len([i for i in range(40) if i % 2 == 1 and i % 3 == 2])


class TestSampling:
    def test_sizes_are_respected_and_capped_by_what_exists(self):
        sizes = {"building|<50k": 3, "qa|50k–150k": 100, "research|<50k": 5}
        sample = sampling.sample_runs(runs_fixture(), sizes, seed=1)
        by_stratum = {}
        for run in sample:
            by_stratum.setdefault(f"{run.task_type}|{run.band}", []).append(run)
        assert len(by_stratum["building|<50k"]) == 3
        available = sampling.strata_counts(runs_fixture())["qa|50k–150k"]
        assert len(by_stratum["qa|50k–150k"]) == available
        assert "research|<50k" not in by_stratum
        assert len({r.run_id for r in sample}) == len(sample)

    def test_every_sampled_run_is_in_its_stratum(self):
        info = {r.run_id: r for r in runs_fixture()}
        for run in sampling.sample_runs(runs_fixture(), {"qa|≥600k": 2, "qa|350k–600k": 4}, seed=3):
            assert info[run.run_id].task_type == run.task_type
            assert sampling.band_of(info[run.run_id].median_context) == run.band

    def test_reproducible_and_seed_sensitive(self):
        sizes = {"building|<50k": 3, "qa|350k–600k": 3}
        first = sampling.sample_runs(runs_fixture(), sizes, seed=42)
        assert first == sampling.sample_runs(runs_fixture(), sizes, seed=42)
        others = [sampling.sample_runs(runs_fixture(), sizes, seed=s) for s in range(43, 53)]
        assert any(o != first for o in others)

    def test_three_distinct_steps_inside_the_run(self):
        for run in sampling.sample_runs(runs_fixture(), {"building|<50k": 7}, seed=5):
            assert len(run.step_positions) == 3
            assert list(run.step_positions) == sorted(set(run.step_positions))
            assert all(0 <= c <= 9 for c in run.step_positions)

    def test_a_stratum_does_not_depend_on_other_strata(self):
        sizes = {"building|<50k": 2, "qa|≥600k": 3}
        extra = [RunInfo(1000 + i, "qa", 700_000, 50) for i in range(9)]
        before = sampling.sample_runs(runs_fixture(), sizes, seed=9)
        after = sampling.sample_runs(runs_fixture() + extra, sizes, seed=9)
        assert [r for r in after if r.task_type == "building"] == before
        assert len([r for r in after if r.task_type == "qa"]) == 3

    def test_short_run_gives_all_its_calls(self):
        assert sampling.choose_steps(RunInfo(1, "qa", 1, 2), seed=0) == (0, 1)

    def test_negative_size_is_refused(self):
        with pytest.raises(ValueError, match=r"qa\|<50k"):
            sampling.sample_runs(runs_fixture(), {"qa|<50k": -1}, seed=0)


def crafted_calls():
    return [
        CallInput(
            10,
            20_000,
            {
                "summary": "S" * 400,
                "prompt": "Fix the flaky test in checkout.",
                "blocks": [
                    {"type": "thinking", "text": "think about it"},
                    {"type": "text", "text": "I will read the test."},
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Read",
                        "input": {"file_path": "/a.py"},
                    },
                ],
                "results": {"t1": {"content": "x" * 81, "is_error": False}},
            },
        ),
        CallInput(
            11,
            21_000,
            {
                "blocks": [
                    {
                        "type": "tool_use",
                        "id": "t2",
                        "name": "Bash",
                        "input": {"command": "pytest"},
                    },
                ],
                "results": {"t2": {"content": "FAILED", "is_error": True}},
            },
        ),
        CallInput(
            12,
            22_000,
            {"prompt": "Use the fixture instead.", "blocks": [{"type": "text", "text": "Done."}]},
        ),
        CallInput(13, 23_000, {"blocks": [{"type": "text", "text": "after the last step"}]}),
    ]


class TestPackets:
    def build(self, steps=(10, 11, 12), **extra):
        return packets.build_packet(
            run_id=1, session_id=2, agent_id=3, task_type="qa", band="<50k",
            calls=crafted_calls(), step_call_indexes=steps, **extra,
        )  # fmt: skip

    def test_inventory_numbers_kinds_and_tokens(self):
        packet = self.build()
        kinds = [(i.id, i.kind, i.call_index) for i in packet.items]
        assert kinds == [
            (1, "summary", 10),
            (2, "operator_message", 10),
            (3, "assistant_text", 10),
            (4, "tool_call", 10),
            (5, "tool_result", 11),
            (6, "tool_call", 11),
            (7, "tool_result", 12),
            (8, "operator_message", 12),
        ]
        assert packet.items[0].tokens == 100  # 400 characters / 4
        assert packet.items[4].tokens == math.ceil(81 / 4)
        assert packet.items[4].label == "result of Read"
        assert packet.items[6].label == "result of Bash (error)"
        assert packet.items[3].label == "Read: /a.py"

    def test_summary_is_labelled_as_a_lossy_digest_and_uses_the_measured_size(self):
        packet = self.build(summary_tokens=4_382)
        assert packet.summary == "S" * 400
        assert "lossy digest" in packet.summary_label
        assert packet.items[0].tokens == 4_382 and packet.summary_tokens == 4_382

    def test_each_step_had_what_came_before_it_and_shows_what_it_did(self):
        packet = self.build()
        had = [(s.call_index, s.had_through_item, s.window_tokens) for s in packet.steps]
        assert had == [(10, 2, 20_000), (11, 5, 21_000), (12, 8, 22_000)]
        sizes = [i.tokens for i in packet.items]
        assert packet.steps[1].had_tokens == sum(sizes[:5])
        first = packet.steps[0]
        assert [a.kind for a in first.did] == ["thinking", "text", "tool_call"]
        assert packet.steps[1].did[0].tool == "Bash" and packet.steps[1].did[0].is_error
        assert [s.directive_item for s in packet.steps] == [2, 2, 8]
        # Thinking is shown as what a step did, never as an inventory item.
        assert all(i.text != "think about it" for i in packet.items)

    def test_directive_from_the_run_or_from_before_it(self):
        assert self.build().directive == "Fix the flaky test in checkout."
        calls = [CallInput(5, 1000, {"blocks": [{"type": "text", "text": "go"}]})]
        packet = packets.build_packet(
            run_id=1, session_id=1, agent_id=1, task_type="qa", band="<50k", calls=calls,
            step_call_indexes=[5], directive_before="Earlier directive",
        )  # fmt: skip
        assert packet.directive == "Earlier directive"
        assert packet.directive_source == "latest operator message before the run"

    def test_inventory_stops_at_the_last_sampled_step(self):
        packet = self.build(steps=(10, 11))
        assert len(packet.items) == 5
        assert packet.to_dict()["steps"][1]["had_through_item"] == 5

    def test_invalid_item_ids(self):
        assert packets.invalid_item_ids([1, 5, 0, 6, "2", True, 2.0], 5) == [0, 6, "2", True, 2.0]
        assert packets.invalid_item_ids([], 0) == []


def judged(step, judge, *, active=(), helpful=(), verbatim=False, cf="unaffected", band="<50k",
           task="qa", window=10_000, kind="human", confidence="high", order=0):  # fmt: skip
    return JudgedStep(
        step, judge, kind, task, band, window, frozenset(active), frozenset(helpful), verbatim,
        cf, confidence, order,
    )  # fmt: skip


def reference_wilson(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


class TestFractions:
    def test_tokens_come_from_item_ids(self):
        sizes = {"p": [100, 200, 300, 400]}
        steps = [
            judged(s, "a", active=[1, 3], helpful=[2], window=1_000, order=s) for s in range(6)
        ]
        result = fractions.audit_results(
            steps, item_tokens=sizes, step_packet=dict.fromkeys(range(6), "p"),
            band_order=["<50k"], task_order=["qa"],
        )  # fmt: skip
        row = result.bands[0]
        assert row.n == 6
        assert row.active_tokens.value == 400
        assert row.active_share.value == pytest.approx(0.4)
        assert row.helpful_tokens.value == 200
        # n = 6 at 95%: order statistics 1 and 6 (coverage 1 − 2/64 = 0.969).
        assert row.active_tokens.ci == (400, 400)

    def test_median_interval_from_order_statistics(self):
        sizes = {"p": list(range(1, 21))}
        steps = [judged(s, "a", active=[s + 1], order=s) for s in range(10)]
        result = fractions.audit_results(
            steps, item_tokens=sizes, step_packet=dict.fromkeys(range(10), "p"),
            band_order=["<50k", "≥600k"], task_order=["qa"],
        )  # fmt: skip
        band = result.bands[0]
        assert band.active_tokens.value == 5.5
        # Binomial(10, ½): P(2 ≤ B ≤ 7) = 0.9785 ≥ 0.95 while P(3 ≤ B ≤ 6) = 0.891: ranks 2 and 9.
        assert band.active_tokens.ci == (2, 9)
        assert result.bands[1].n == 0 and result.bands[1].active_tokens.value is None

    def test_verbatim_by_task_and_counterfactuals_with_wilson(self):
        steps = []
        for s in range(20):
            steps.append(
                judged(s, "a", task="building" if s < 12 else "pr_to_merge",
                       verbatim=s < 3, cf="slightly_degraded" if s % 5 == 0 else "unaffected",
                       order=s)
            )  # fmt: skip
        result = fractions.audit_results(
            steps, item_tokens={"p": [1]}, step_packet=dict.fromkeys(range(20), "p"),
            band_order=["<50k"], task_order=["building", "pr_to_merge", "qa"],
        )  # fmt: skip
        building = result.verbatim_by_task["building"]
        assert (building.k, building.n) == (3, 12)
        assert building.ci == pytest.approx(reference_wilson(3, 12))
        assert "qa" not in result.verbatim_by_task
        slight = result.counterfactual["slightly_degraded"]
        assert (slight.k, slight.n) == (4, 20)
        assert slight.ci == pytest.approx(reference_wilson(4, 20))
        assert result.counterfactual["impossible"].k == 0

    def test_each_step_counts_once_by_its_first_judgment(self):
        steps = [
            judged("s1", "b", verbatim=True, order=2),
            judged("s1", "a", verbatim=False, order=1),
            judged("s2", "a", verbatim=True, order=3),
        ]
        result = fractions.audit_results(
            steps, item_tokens={"p": [1]}, step_packet={"s1": "p", "s2": "p"},
            band_order=["<50k"], task_order=["qa"],
        )  # fmt: skip
        assert result.n_steps == 2 and result.n_judgments == 3
        assert (result.verbatim_overall.k, result.verbatim_overall.n) == (1, 2)

    def test_judge_kind_and_confidence_filters(self):
        steps = [
            judged("s1", "a", kind="llm", confidence="low", order=1),
            judged("s2", "a", kind="llm", confidence="high", order=2),
            judged("s3", "u", kind="human", order=3),
        ]
        result = fractions.audit_results(
            steps, item_tokens={"p": [1]}, step_packet={"s1": "p", "s2": "p", "s3": "p"},
            band_order=["<50k"], task_order=["qa"], judge_kind="llm", min_confidence="medium",
        )  # fmt: skip
        assert result.n_steps == 1 and result.excluded_low_confidence == 1

    def test_cohen_kappa_against_the_hand_formula(self):
        # Two judges on 10 steps; counterfactual classes:
        a = ["unaffected"] * 6 + ["slightly_degraded"] * 4
        b = ["unaffected"] * 5 + ["slightly_degraded"] * 3 + ["unaffected"] * 2
        steps = []
        for s in range(10):
            steps.append(judged(s, "alice", cf=a[s], active=[1, 2], order=2 * s))
            steps.append(judged(s, "bob", cf=b[s], active=[2], order=2 * s + 1))
        result = fractions.audit_results(
            steps, item_tokens={"p": [5, 5]}, step_packet=dict.fromkeys(range(10), "p"),
            band_order=["<50k"], task_order=["qa"],
        )  # fmt: skip
        # Observed: agree on steps 0–4 (U/U) and 6–7 (S/S): 7 of 10. Margins: alice U 6, S 4;
        # bob U 7, S 3. Chance: 0.6·0.7 + 0.4·0.3 = 0.54. Kappa = (0.7 − 0.54) / 0.46.
        agreement = result.agreement
        assert agreement.steps == 10
        assert agreement.counterfactual.method == "cohen"
        assert agreement.counterfactual.kappa == pytest.approx((0.7 - 0.54) / 0.46)
        assert agreement.counterfactual.observed_agreement == pytest.approx(0.7)
        assert agreement.active_jaccard == pytest.approx(0.5)
        assert agreement.active_jaccard_ci is None  # every step overlaps alike: no spread

    def test_degenerate_agreement_is_undefined(self):
        steps = []
        for s in range(5):
            steps.append(judged(s, "alice", order=2 * s))
            steps.append(judged(s, "bob", order=2 * s + 1))
        agreement = fractions.audit_results(
            steps, item_tokens={"p": [1]}, step_packet=dict.fromkeys(range(5), "p"),
            band_order=["<50k"], task_order=["qa"],
        ).agreement  # fmt: skip
        assert agreement.counterfactual.kappa is None
        assert "undefined" in agreement.counterfactual.reason
        assert agreement.verbatim.kappa is None

    def test_no_second_judge_no_agreement(self):
        agreement = fractions.audit_results(
            [judged("s", "a")], item_tokens={"p": [1]}, step_packet={"s": "p"},
            band_order=["<50k"], task_order=["qa"],
        ).agreement  # fmt: skip
        assert agreement.steps == 0 and agreement.counterfactual.kappa is None
        assert agreement.active_jaccard is None
