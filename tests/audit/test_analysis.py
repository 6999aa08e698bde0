"""The audit's pure parts: sampling, packets and fractions, against independent computations."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import pytest

from traces.audit.analysis import fractions, packets, sampling
from traces.audit.analysis.fractions import JudgedStep
from traces.audit.analysis.packets import CallInput
from traces.audit.analysis.sampling import RunInfo

EDGES = (50_000, 150_000, 350_000, 600_000)
LABELS = ["<50k", "50k–150k", "150k–350k", "350k–600k", "≥600k"]


def ref_band_index(tokens: int, edges=EDGES) -> int:
    """Independent reference: the band of a window is the number of edges at or below it."""
    index = 0
    for edge in edges:
        if tokens >= edge:
            index += 1
    return index


def ref_bounds(label: str, edges=EDGES) -> tuple[int, float]:
    bounds = [0, *edges, math.inf]
    i = LABELS.index(label) if edges == EDGES else sampling.band_labels(edges).index(label)
    return bounds[i], bounds[i + 1]


def ref_strata(runs, edges=EDGES, per_run=3):
    """Per stratum: steps, steps it can give (≤ per_run per run), runs; by a plain loop."""
    steps, drawable, members = Counter(), Counter(), defaultdict(set)
    for run in runs:
        per_band = Counter(ref_band_index(c, edges) for c in run.contexts)
        for index, n in per_band.items():
            key = f"{run.task_type}|{LABELS[index]}"
            steps[key] += n
            drawable[key] += min(per_run, n)
            members[key].add(run.run_id)
    return steps, drawable, {k: len(v) for k, v in members.items()}


def shaped_runs(seed: int, count: int = 60) -> list[RunInfo]:
    """Varied shapes: climbing runs that cross several bands, flat runs inside one band,
    short runs of one or two calls, empty runs, windows exactly on the edges, and runs that
    fall after a compaction."""
    rng = random.Random(seed)
    runs = []
    for i in range(count):
        task = rng.choice(["building", "qa", "research"])
        shape = rng.choice(["climb", "flat", "short", "edges", "empty", "fall"])
        if shape == "climb":
            start, step = rng.randint(5_000, 200_000), rng.randint(2_000, 40_000)
            contexts = [start + step * k for k in range(rng.randint(5, 40))]
        elif shape == "flat":
            base = rng.choice([20_000, 100_000, 250_000, 450_000, 800_000])
            contexts = [base + rng.randint(-5_000, 5_000) for _ in range(rng.randint(1, 12))]
        elif shape == "short":
            contexts = [rng.randint(1_000, 900_000) for _ in range(rng.randint(1, 2))]
        elif shape == "edges":
            contexts = [e + d for e in EDGES for d in (-1, 0)]
        elif shape == "empty":
            contexts = []
        else:
            contexts = [rng.randint(300_000, 700_000)] + [
                rng.randint(20_000, 60_000) for _ in range(rng.randint(2, 8))
            ]
        median = sorted(contexts)[len(contexts) // 2] if contexts else 0
        runs.append(RunInfo(1000 + i, task, median, tuple(contexts)))
    return runs


class TestBands:
    def test_edges_are_half_open(self):
        assert sampling.band_labels() == LABELS
        assert sampling.band_of(49_999) == "<50k"
        assert sampling.band_of(50_000) == "50k–150k"
        assert sampling.band_of(600_000) == "≥600k"
        assert sampling.band_labels((10, 20_000)) == ["<10", "10–20k", "≥20k"]

    @pytest.mark.parametrize("seed", range(4))
    def test_positions_by_band_match_the_reference(self, seed):
        for run in shaped_runs(seed):
            grouped = sampling.positions_by_band(run)
            expected = defaultdict(list)
            for i, tokens in enumerate(run.contexts):
                expected[LABELS[ref_band_index(tokens)]].append(i)
            assert grouped == dict(expected)

    @pytest.mark.parametrize("seed", range(4))
    def test_strata_counts_match_the_reference(self, seed):
        runs = shaped_runs(seed)
        steps, drawable, members = ref_strata(runs)
        available = sampling.strata_availability(runs)
        assert {k: a.steps for k, a in available.items()} == dict(steps)
        assert {k: a.drawable for k, a in available.items()} == dict(drawable)
        assert {k: a.runs for k, a in available.items()} == members
        assert sampling.strata_counts(runs) == dict(drawable)

    def test_a_run_crossing_bands_counts_in_each(self):
        run = RunInfo(1, "qa", 100_000, (10_000, 49_999, 50_000, 149_999, 150_000, 700_000))
        assert sampling.strata_counts([run]) == {
            "qa|<50k": 2, "qa|50k–150k": 2, "qa|150k–350k": 1, "qa|≥600k": 1,
        }  # fmt: skip


def sample_by_stratum(runs, sample):
    """(stratum key → [(run id, position)]) from a sample, checking each run appears once."""
    info = {r.run_id: r for r in runs}
    assert len({s.run_id for s in sample}) == len(sample)
    drawn = defaultdict(list)
    for s in sample:
        run = info[s.run_id]
        assert s.task_type == run.task_type
        assert s.band == sampling.band_of(run.median_context)
        assert list(s.step_positions) == sorted(set(s.step_positions))
        assert len(s.step_bands) == len(s.step_positions)
        for position, band in zip(s.step_positions, s.step_bands, strict=True):
            assert 0 <= position < run.call_count
            drawn[f"{run.task_type}|{band}"].append((run.run_id, position))
    return drawn


class TestSampling:
    @pytest.mark.parametrize("seed", range(6))
    def test_strata_sizes_and_bands_against_the_reference(self, seed):
        runs = shaped_runs(seed)
        info = {r.run_id: r for r in runs}
        _, drawable, _ = ref_strata(runs)
        rng = random.Random(seed)
        keys = sorted(drawable)
        sizes = {k: rng.choice([1, 2, 3, 4, 7, 10, 500]) for k in keys}
        sizes["research|≥600k"] = sizes.get("research|≥600k", 5)  # may have no steps
        sample = sampling.sample_steps(runs, sizes, seed=seed)
        drawn = sample_by_stratum(runs, sample)
        for key, size in sizes.items():
            assert len(drawn.get(key, [])) == min(size, drawable.get(key, 0)), key
        assert set(drawn) <= set(sizes)
        for key, steps in drawn.items():
            task, _, band = key.partition("|")
            low, high = ref_bounds(band)
            per_run = Counter(run_id for run_id, _ in steps)
            assert max(per_run.values()) <= 3
            for run_id, position in steps:
                assert info[run_id].task_type == task
                assert low <= info[run_id].contexts[position] < high, (key, run_id, position)

    def test_a_run_drawn_in_several_strata_makes_one_packet(self):
        run = RunInfo(7, "building", 200_000, tuple(range(10_000, 700_000, 10_000)))
        sizes = {f"building|{b}": 3 for b in LABELS}
        (only,) = sampling.sample_steps([run], sizes, seed=3)
        assert Counter(only.step_bands) == dict.fromkeys(LABELS, 3)
        for position, band in zip(only.step_positions, only.step_bands, strict=True):
            low, high = ref_bounds(band)
            assert low <= run.contexts[position] < high

    def test_clusters_of_three_then_the_remainder(self):
        runs = [RunInfo(i, "qa", 20_000, (20_000,) * 10) for i in range(1, 6)]
        sample = sampling.sample_steps(runs, {"qa|<50k": 8}, seed=4)
        assert sorted(len(s.step_positions) for s in sample) == [2, 3, 3]

    def test_short_runs_give_what_they_have(self):
        runs = [RunInfo(1, "qa", 10, (10,)), RunInfo(2, "qa", 10, (10, 20))]
        sample = sampling.sample_steps(runs, {"qa|<50k": 10}, seed=0)
        assert {s.run_id: s.step_positions for s in sample} == {1: (0,), 2: (0, 1)}

    def test_each_run_of_a_stratum_is_equally_likely(self):
        runs = [RunInfo(i, "qa", 20_000, (20_000,) * (3 + 5 * i)) for i in range(4)]
        first = Counter(
            sampling.sample_steps(runs, {"qa|<50k": 3}, seed=s)[0].run_id for s in range(2000)
        )
        assert set(first) == {0, 1, 2, 3}
        assert all(abs(n / 2000 - 0.25) < 0.04 for n in first.values()), first

    def test_reproducible_and_seed_sensitive(self):
        runs = shaped_runs(11)
        sizes = dict.fromkeys(sampling.strata_counts(runs), 4)
        first = sampling.sample_steps(runs, sizes, seed=42)
        assert first == sampling.sample_steps(list(reversed(runs)), sizes, seed=42)
        others = [sampling.sample_steps(runs, sizes, seed=s) for s in range(43, 53)]
        assert any(o != first for o in others)

    def test_a_stratum_does_not_depend_on_other_strata(self):
        runs = shaped_runs(12)
        sizes = {"building|<50k": 5, "qa|≥600k": 4}
        extra = [RunInfo(5000 + i, "qa", 700_000, (700_000,) * 6) for i in range(9)]
        before = sample_by_stratum(runs, sampling.sample_steps(runs, sizes, seed=9))
        after = sample_by_stratum(runs + extra, sampling.sample_steps(runs + extra, sizes, seed=9))
        assert after["building|<50k"] == before["building|<50k"]
        assert len(after["qa|≥600k"]) == 4

    def test_negative_size_is_refused(self):
        with pytest.raises(ValueError, match=r"qa\|<50k"):
            sampling.sample_steps(shaped_runs(1), {"qa|<50k": -1}, seed=0)


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
