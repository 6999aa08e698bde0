"""Results of a pre-registered with/without evaluation: every arm against the no-file baseline.

Pure: plain trial records in, dataclasses out. Outcomes, cost and adherence stay in
separate fields; the verdict comes only from the paired success outcome (METHODS.md §4).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from qualification.analysis.paired import (
    PairedComparison,
    PairedTable,
    TaskRateEquivalence,
    compare_paired,
    task_rate_equivalence,
)
from qualification.analysis.power import PowerStatement, power_statement


@dataclass(frozen=True)
class TrialRecord:
    task_id: str
    repeat: int
    arm: str
    success: bool
    adherence: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    cost: float | None = None


@dataclass(frozen=True)
class ArmSpec:
    name: str
    kind: str  # baseline, full, ablation
    label: str
    token_estimate: int = 0


@dataclass(frozen=True)
class Rate:
    n: int
    value: float | None
    ci95: tuple[float, float] | None
    method: str = "Wilson 95%"


@dataclass(frozen=True)
class MeanWithInterval:
    n: int
    mean: float | None
    ci95: tuple[float, float] | None
    method: str = "paired mean difference, t interval 95%"


@dataclass(frozen=True)
class ArmCost:
    trials_with_tokens: int
    mean_input_tokens: float | None
    mean_output_tokens: float | None
    mean_model_calls: float | None
    mean_tool_calls: float | None
    tokens_per_completed_task: float | None
    cost_per_completed_task: float | None
    completed: int
    note: str = ""


@dataclass(frozen=True)
class ArmResult:
    name: str
    kind: str
    label: str
    file_tokens: int
    trials: int
    tasks: int
    success: Rate
    adherence: Rate
    cost: ArmCost
    comparison: PairedComparison | None = None
    token_difference: MeanWithInterval | None = None
    relative_tokens: float | None = None


@dataclass(frozen=True)
class EvaluationResults:
    arms: list[ArmResult]
    primary: ArmResult | None
    power: PowerStatement | None
    task_level: TaskRateEquivalence | None
    delta: float
    margin: float
    notes: list[str] = field(default_factory=list)

    @property
    def has_results(self) -> bool:
        return self.primary is not None and self.primary.comparison is not None

    def arm(self, name: str) -> ArmResult | None:
        return next((a for a in self.arms if a.name == name), None)

    def to_dict(self) -> dict:
        """The shape of `GET …/results/` (and of a decision record's snapshot)."""
        comparison = self.primary.comparison if self.has_results else None
        power = self.power
        return {
            "status": "ok" if comparison else "awaiting_trials",
            "n_pairs": comparison.n_pairs if comparison else 0,
            "table": comparison.table.as_dict() if comparison else None,
            "difference": comparison.difference if comparison else None,
            "ci95": comparison.ci95.as_list() if comparison else None,
            "ci90": comparison.ci90.as_list() if comparison else None,
            "ci_method": comparison.ci95.method if comparison else None,
            "mcnemar_p_exact": comparison.mcnemar.exact_p if comparison else None,
            "mcnemar_midp": comparison.mcnemar.mid_p if comparison else None,
            "equivalent": comparison.equivalent if comparison else None,
            "within_margin": comparison.decision.within_margin if comparison else None,
            "verdict": comparison.verdict.value if comparison else None,
            "verdict_reason": comparison.decision.reason if comparison else None,
            "delta": self.delta,
            "margin": self.margin,
            "power": power.superiority_power if power else None,
            "needed_pairs": power.superiority_needed if power else None,
            "power_detail": asdict(power) if power else None,
            "task_level": asdict(self.task_level) if self.task_level else None,
            "arms": {arm.name: _arm_dict(arm) for arm in self.arms},
            "notes": self.notes,
        }


def _arm_dict(arm: ArmResult) -> dict:
    data = {
        "kind": arm.kind,
        "label": arm.label,
        "file_tokens": arm.file_tokens,
        "trials": arm.trials,
        "tasks": arm.tasks,
        "success_rate": arm.success.value,
        "success_ci95": list(arm.success.ci95) if arm.success.ci95 else None,
        "adherence": arm.adherence.value,
        "adherence_n": arm.adherence.n,
        "adherence_ci95": list(arm.adherence.ci95) if arm.adherence.ci95 else None,
        "cost": asdict(arm.cost),
        "token_difference_vs_baseline": asdict(arm.token_difference)
        if arm.token_difference
        else None,
        "relative_tokens_vs_baseline": arm.relative_tokens,
        "comparison": None,
    }
    if arm.comparison is not None:
        c = arm.comparison
        data["comparison"] = {
            "n_pairs": c.n_pairs,
            "table": c.table.as_dict(),
            "difference": c.difference,
            "ci95": c.ci95.as_list(),
            "ci90": c.ci90.as_list(),
            "mcnemar_p_exact": c.mcnemar.exact_p,
            "mcnemar_midp": c.mcnemar.mid_p,
            "equivalent": c.equivalent,
            "within_margin": c.decision.within_margin,
            "verdict": c.verdict.value,
            "verdict_reason": c.decision.reason,
        }
    return data


def _rate(values: Sequence[float]) -> Rate:
    n = len(values)
    if n == 0:
        return Rate(0, None, None)
    total = float(sum(values))
    low, high = proportion_confint(total, n, alpha=0.05, method="wilson")
    return Rate(n, total / n, (float(low), float(high)))


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def _cost(trials: Sequence[TrialRecord]) -> ArmCost:
    completed = sum(1 for t in trials if t.success)
    with_tokens = [t for t in trials if t.input_tokens is not None and t.output_tokens is not None]
    note = ""
    per_task = None
    if with_tokens and len(with_tokens) == len(trials):
        total = sum(t.input_tokens + t.output_tokens for t in trials)
        per_task = total / completed if completed else None
        if not completed:
            note = "No task was completed, so there is no cost per completed task."
    elif trials:
        note = f"{len(trials) - len(with_tokens)} of {len(trials)} trials lack token counts."
    money = None
    if completed and all(t.cost is not None for t in trials):
        money = sum(t.cost for t in trials) / completed
    return ArmCost(
        trials_with_tokens=len(with_tokens),
        mean_input_tokens=_mean(t.input_tokens for t in trials),
        mean_output_tokens=_mean(t.output_tokens for t in trials),
        mean_model_calls=_mean(t.model_calls for t in trials),
        mean_tool_calls=_mean(t.tool_calls for t in trials),
        tokens_per_completed_task=per_task,
        cost_per_completed_task=money,
        completed=completed,
        note=note,
    )


def _paired_token_difference(
    arm: dict[tuple[str, int], TrialRecord], baseline: dict[tuple[str, int], TrialRecord]
) -> tuple[MeanWithInterval | None, float | None]:
    diffs, base_totals = [], []
    for key, trial in arm.items():
        other = baseline.get(key)
        if other is None or None in (
            trial.input_tokens,
            trial.output_tokens,
            other.input_tokens,
            other.output_tokens,
        ):
            continue
        base = other.input_tokens + other.output_tokens
        diffs.append(trial.input_tokens + trial.output_tokens - base)
        base_totals.append(base)
    if len(diffs) < 2:
        return None, None
    values = np.asarray(diffs, dtype=float)
    mean = float(values.mean())
    sem = float(values.std(ddof=1) / math.sqrt(len(values)))
    if sem == 0:
        ci = (mean, mean)
    else:
        half = float(stats.t.ppf(0.975, len(values) - 1)) * sem
        ci = (mean - half, mean + half)
    base_mean = float(np.mean(base_totals))
    relative = mean / base_mean if base_mean else None
    return MeanWithInterval(len(values), mean, ci), relative


def analyse_evaluation(
    trials: Iterable[TrialRecord],
    arms: Sequence[ArmSpec],
    *,
    delta: float,
    margin: float,
    target_power: float = 0.8,
    pilot_discordance: float | None = None,
) -> EvaluationResults:
    by_arm: dict[str, dict[tuple[str, int], TrialRecord]] = defaultdict(dict)
    for trial in trials:
        by_arm[trial.arm][(trial.task_id, trial.repeat)] = trial
    baseline_spec = next((a for a in arms if a.kind == "baseline"), None)
    if baseline_spec is None:
        raise ValueError("an evaluation needs a baseline (no-file) arm")
    baseline = by_arm.get(baseline_spec.name, {})
    notes: list[str] = []
    results: list[ArmResult] = []
    for spec in arms:
        records = by_arm.get(spec.name, {})
        values = list(records.values())
        comparison = token_difference = relative = None
        if spec.kind != "baseline":
            pairs = [
                (trial.success, baseline[key].success)
                for key, trial in records.items()
                if key in baseline
            ]
            if pairs:
                comparison = compare_paired(
                    PairedTable.from_outcomes(pairs), delta=delta, margin=margin
                )
            token_difference, relative = _paired_token_difference(records, baseline)
        results.append(
            ArmResult(
                name=spec.name,
                kind=spec.kind,
                label=spec.label,
                file_tokens=spec.token_estimate,
                trials=len(values),
                tasks=len({t.task_id for t in values}),
                success=_rate([float(t.success) for t in values]),
                adherence=_rate([t.adherence for t in values if t.adherence is not None]),
                cost=_cost(values),
                comparison=comparison,
                token_difference=token_difference,
                relative_tokens=relative,
            )
        )
    primary = next((r for r in results if r.kind == "full"), None)
    power = task_level = None
    if primary is not None and primary.comparison is not None:
        table = primary.comparison.table
        power = power_statement(
            n_pairs=table.n,
            observed_psi=table.discordance,
            margin=margin,
            delta=delta,
            registered_psi=pilot_discordance,
            target_power=target_power,
        )
        task_level = _task_level(by_arm.get(primary.name, {}), baseline, margin=margin)
        if task_level is not None and task_level.equivalent != primary.comparison.equivalent:
            notes.append(
                "Repeats are correlated within a task. The task-level equivalence test "
                f"({'equivalent' if task_level.equivalent else 'not equivalent'}) disagrees "
                "with the per-pair interval; read the verdict with that in mind."
            )
    return EvaluationResults(
        arms=results,
        primary=primary,
        power=power,
        task_level=task_level,
        delta=delta,
        margin=margin,
        notes=notes,
    )


def _task_level(
    arm: dict[tuple[str, int], TrialRecord],
    baseline: dict[tuple[str, int], TrialRecord],
    *,
    margin: float,
) -> TaskRateEquivalence | None:
    """Per-task pass rates with vs without, when tasks were repeated."""
    if not any(repeat > 1 for _, repeat in arm):
        return None
    with_rates: dict[str, list[float]] = defaultdict(list)
    without_rates: dict[str, list[float]] = defaultdict(list)
    for key, trial in arm.items():
        if key in baseline:
            with_rates[key[0]].append(float(trial.success))
            without_rates[key[0]].append(float(baseline[key].success))
    tasks = sorted(with_rates)
    if len(tasks) < 2:
        return None
    return task_rate_equivalence(
        [float(np.mean(with_rates[t])) for t in tasks],
        [float(np.mean(without_rates[t])) for t in tasks],
        margin=margin,
    )


def bare_table_summary(
    table: PairedTable,
    *,
    delta: float,
    margin: float,
    pilot_discordance: float | None = None,
    target_power: float = 0.8,
) -> dict:
    """The results statistics for a bare 2×2 table (the paired-comparison calculator)."""
    comparison = compare_paired(table, delta=delta, margin=margin)
    power = power_statement(
        n_pairs=table.n,
        observed_psi=table.discordance,
        margin=margin,
        delta=delta,
        registered_psi=pilot_discordance,
        target_power=target_power,
    )
    return {
        "n_pairs": table.n,
        "table": table.as_dict(),
        "difference": comparison.difference,
        "ci95": comparison.ci95.as_list(),
        "ci90": comparison.ci90.as_list(),
        "ci_method": comparison.ci95.method,
        "mcnemar_p_exact": comparison.mcnemar.exact_p,
        "mcnemar_midp": comparison.mcnemar.mid_p,
        "equivalent": comparison.equivalent,
        "within_margin": comparison.decision.within_margin,
        "verdict": comparison.verdict.value,
        "verdict_reason": comparison.decision.reason,
        "delta": delta,
        "margin": margin,
        "power": power.superiority_power,
        "needed_pairs": power.superiority_needed,
        "power_detail": asdict(power),
    }
