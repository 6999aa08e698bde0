"""One family's analysis: the four outcomes per stratum, the ECL with its uncertainty, knee, saturation and refusals."""

from __future__ import annotations

import zlib
from dataclasses import asdict

import numpy as np
import pandas as pd

from qualification.analysis import ecl as ecl_mod
from qualification.analysis.intervals import (
    mean_t_interval,
    pass_hat_k,
    ruler_weighted_averages,
    task_clustered_interval,
)
from qualification.analysis.knee import hinge_fit, kneedle_crosscheck, paired_drop_knee
from qualification.analysis.refusals import (
    RULE_UNPAIRED,
    check_refusals,
)
from qualification.analysis.saturation import saturation_point
from qualification.analysis.sweep.params import AnalysisParams
from qualification.analysis.sweep.results import (
    FamilyResult,
    StratumResult,
    _interval,
    _nan_to_none,
    ecl_text,
)


def _cells(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per task × stratum with repeat counts, passes and per-task means."""
    grouped = frame.groupby(["task", "stratum"], sort=True)
    return grouped.agg(
        repeats=("task_correct", "size"),
        correct=("task_correct", "sum"),
        retrieval_n=("retrieval_correct", "count"),
        retrieval_sum=("retrieval_correct", "sum"),
        input_tokens=("input_tokens", "mean"),
        output_tokens=("output_tokens", "mean"),
        model_calls=("model_calls", "mean"),
        tool_calls=("tool_calls", "mean"),
        cost=("cost", "mean"),
        cost_sum=("cost", "sum"),
        cost_n=("cost", "count"),
        latency_ms=("latency_ms", "mean"),
    )


def _family_rng(params: AnalysisParams, family: str) -> np.random.Generator:
    return np.random.default_rng([params.bootstrap_seed, zlib.crc32(family.encode())])


def analyse_family(family: str, frame: pd.DataFrame, params: AnalysisParams) -> FamilyResult:
    cells = _cells(frame)
    tasks = [str(t) for t in cells.index.get_level_values("task").unique()]
    strata = sorted(int(s) for s in cells.index.get_level_values("stratum").unique())

    def grid(column: str, fill=np.nan) -> np.ndarray:
        table = cells[column].unstack("stratum").reindex(index=tasks, columns=strata)
        return table.to_numpy(dtype=float, na_value=fill)

    repeats = np.nan_to_num(grid("repeats"), nan=0.0).astype(int)
    correct = np.nan_to_num(grid("correct"), nan=0.0)
    present = repeats > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(present, correct / np.maximum(repeats, 1), np.nan)
        retrieval_rates = grid("retrieval_sum") / grid("retrieval_n")
    k = params.reliability_k or int(repeats[present].min() if present.any() else 1)
    reliability = np.where(present, pass_hat_k(correct, repeats, k), np.nan)
    alpha = params.alpha
    method = params.interval_method

    refusals = check_refusals(
        family=family,
        tasks=tasks,
        strata=strata,
        repeats=repeats,
        theta=params.threshold,
        alpha=alpha,
        interval_method=method,
        min_repeats=params.min_repeats,
    )
    inputs, outputs = grid("input_tokens"), grid("output_tokens")
    model_calls, tool_calls = grid("model_calls"), grid("tool_calls")
    costs, latency = grid("cost"), grid("latency_ms")
    cost_sums, cost_n = grid("cost_sum"), grid("cost_n")

    stratum_results = []
    for j, tokens in enumerate(strata):
        here = present[:, j]
        accuracy = task_clustered_interval(rates[here, j], alpha=alpha, method=method)
        rel = task_clustered_interval(reliability[here, j], alpha=alpha, method=method)
        retrieval = task_clustered_interval(retrieval_rates[here, j], alpha=alpha, method=method)
        input_ci = mean_t_interval(inputs[here, j], alpha=alpha)
        cost_ci = mean_t_interval(costs[here, j], alpha=alpha)
        successes = float((correct[here, j]).sum())
        has_cost = bool(np.nansum(cost_n[here, j]) > 0)
        stratum_results.append(
            StratumResult(
                tokens=tokens,
                tasks=int(here.sum()),
                repeats=int(repeats[here, j].min()) if here.any() else 0,
                repeats_max=int(repeats[here, j].max()) if here.any() else 0,
                trials=int(repeats[here, j].sum()),
                accuracy=accuracy.mean,
                ci=_interval(accuracy),
                lower_bound=accuracy.low,
                passes=accuracy.low is not None and accuracy.low >= params.threshold,
                accuracy_method=accuracy.method,
                reliability=rel.mean,
                reliability_ci=_interval(rel),
                retrieval=retrieval.mean,
                retrieval_ci=_interval(retrieval),
                retrieval_tasks=retrieval.n,
                input_tokens=input_ci.mean,
                input_tokens_ci=_interval(input_ci),
                output_tokens=_nan_to_none(np.nanmean(outputs[here, j])) if here.any() else None,
                model_calls=_nan_to_none(np.nanmean(model_calls[here, j]))
                if here.any() and not np.isnan(model_calls[here, j]).all()
                else None,
                tool_calls=_nan_to_none(np.nanmean(tool_calls[here, j]))
                if here.any() and not np.isnan(tool_calls[here, j]).all()
                else None,
                cost=cost_ci.mean,
                cost_ci=_interval(cost_ci),
                cost_per_success=(float(np.nansum(cost_sums[here, j])) / successes)
                if has_cost and successes
                else None,
                latency_ms=_nan_to_none(np.nanmean(latency[here, j]))
                if here.any() and not np.isnan(latency[here, j]).all()
                else None,
            )
        )

    refused = bool(refusals)
    paired = not any(r.rule == RULE_UNPAIRED for r in refusals) and bool(strata)
    accuracy_curve = [s.accuracy for s in stratum_results]
    point = ecl_mod.fixed_sequence_ecl(
        strata, [s.lower_bound for s in stratum_results], params.threshold
    )
    rel_threshold = params.reliability_threshold or params.threshold
    rel_point = ecl_mod.fixed_sequence_ecl(
        strata, [s.reliability_ci[0] for s in stratum_results], rel_threshold
    )

    uncertainty = knee = saturation = hinge = gee = None
    kneedle_knee = kneedle_sat = None
    kneedle_note = ""
    if paired:
        weights = ecl_mod.bootstrap_weights(
            len(tasks), params.bootstrap_replicates, _family_rng(params, family)
        )
        replicate_means = ecl_mod.bootstrap_means(rates, weights)
        confidences = sorted({0.95, params.lower_ecl_confidence})
        uncertainty = ecl_mod.ecl_uncertainty(
            strata,
            rates,
            replicate_means,
            params.threshold,
            confidences=confidences,
            method=method,
        )
        knee = paired_drop_knee(
            strata,
            rates,
            replicate_means,
            delta=params.knee_delta,
            confidence=params.knee_confidence,
        )
        saturation = saturation_point(
            strata,
            rates,
            replicate_means,
            epsilon=params.saturation_epsilon,
            confidence=params.saturation_confidence,
        )
        hinge = hinge_fit(strata, accuracy_curve, [s.tasks for s in stratum_results])
        knee_check = kneedle_crosscheck(
            strata,
            accuracy_curve,
            direction="decreasing",
            sensitivity=params.kneedle_sensitivity,
            min_strata=params.kneedle_min_strata,
            min_change=params.knee_delta,
        )
        sat_check = kneedle_crosscheck(
            strata,
            accuracy_curve,
            direction="increasing",
            sensitivity=params.kneedle_sensitivity,
            min_strata=params.kneedle_min_strata,
            min_change=params.saturation_epsilon,
        )
        kneedle_knee, kneedle_sat = knee_check.tokens, sat_check.tokens
        kneedle_note = knee_check.note or sat_check.note
        trial_rows = frame.sort_values(["task", "stratum", "repeat"])
        gee = ecl_mod.gee_crosscheck(
            trial_rows["task_correct"].to_numpy(dtype=float),
            np.log2(trial_rows["stratum"].to_numpy(dtype=float)),
            trial_rows["task"].astype(str).to_numpy(),
            theta=params.threshold,
            confidence=params.gee_confidence,
            cap_tokens=point.tokens,
        )

    if refused:
        ecl_tokens, ecl_status = None, ecl_mod.ECL_REFUSED
        lower95 = lower = None
        interval = [None, None]
        prob = uncertainty.prob_at_least if uncertainty else None
    else:
        ecl_tokens, ecl_status = point.tokens, point.status
        lower95 = uncertainty.lower_tokens.get("0.95")
        lower = uncertainty.lower_tokens.get(f"{params.lower_ecl_confidence:g}")
        interval = list(uncertainty.interval_tokens)
        prob = uncertainty.prob_at_least
    curve = [a for a in accuracy_curve if a is not None]
    ruler = asdict(ruler_weighted_averages(curve)) if curve else None
    return FamilyResult(
        family=family,
        tasks=len(tasks),
        trials=int(repeats.sum()),
        strata=stratum_results,
        refusals=refusals,
        ecl_tokens=ecl_tokens,
        ecl_status=ecl_status,
        ecl_text=ecl_text(ecl_tokens, ecl_status, strata),
        ecl_lower95_tokens=lower95,
        ecl_lower_tokens=lower,
        ecl_lower_confidence=params.lower_ecl_confidence,
        ecl_interval_tokens=interval,
        p_ecl_at_least=prob,
        knee_tokens=knee.tokens if knee else None,
        knee=asdict(knee) if knee else None,
        saturation_tokens=saturation.tokens if saturation else None,
        saturation=asdict(saturation) if saturation else None,
        hinge=asdict(hinge) if hinge else None,
        kneedle_knee_tokens=kneedle_knee,
        kneedle_saturation_tokens=kneedle_sat,
        kneedle_note=kneedle_note,
        gee=asdict(gee) if gee else None,
        ruler=ruler,
        reliability_k=k,
        reliability_ecl_tokens=None if refused else rel_point.tokens,
        reliability_ecl_status=ecl_mod.ECL_REFUSED if refused else rel_point.status,
    )
