"""A whole sweep: the trial table, every family and all tasks pooled, the proposed limit, and the shifts from a superseded sweep."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict

import numpy as np
import pandas as pd

from qualification.analysis.limits import FamilyBasis, propose_limit
from qualification.analysis.refusals import (
    check_refusals,
)
from qualification.analysis.sweep.family import analyse_family
from qualification.analysis.sweep.params import COLUMNS, OVERALL, AnalysisParams
from qualification.analysis.sweep.results import SweepResult


def trials_frame(rows) -> pd.DataFrame:
    """A trial table from dicts or tuples in COLUMNS order, with the dtypes analysis expects."""
    frame = (
        pd.DataFrame.from_records(rows, columns=COLUMNS) if rows else pd.DataFrame(columns=COLUMNS)
    )
    for column in ("task_correct", "retrieval_correct", "input_tokens", "output_tokens",
                   "model_calls", "tool_calls", "cost", "latency_ms"):  # fmt: skip
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    frame["stratum"] = frame["stratum"].astype("int64")
    frame["family"] = frame["family"].astype(str)
    frame["task"] = frame["task"].astype(str)
    return frame


METHOD_NOTES = {
    "accuracy": "Per-stratum accuracy is the mean of per-task pass rates; its interval is "
    "Korn–Graubard's: Clopper–Pearson on the effective number of tasks p̂(1 − p̂)/var̂(p̂), "
    "df-adjusted (two-sided at 1 − 2α, so its lower edge is the one-sided bound), capped by the "
    "binomial bound for n tasks all passing, and the binomial bound over tasks when every task "
    "has the same rate.",
    "ecl": "ECL: fixed-sequence rule — test LCB ≥ θ from the smallest stratum up at the full α "
    "and stop at the first failure.",
    "ecl_uncertainty": "Task bootstrap (tasks resampled with replacement, strata kept paired), "
    "non-increasing isotonic fit per replicate; P(ECL ≥ L) is the share of replicates whose fit "
    "clears θ at L. The lower ECL at confidence c is the smaller of the bootstrap's (largest L "
    "with P ≥ c) and the fixed-sequence ECL at α = 1 − c.",
    "knee": "Paired-drop test: the first stratum after the isotonic plateau whose paired drop is "
    "≥ δ_knee and whose one-sided bootstrap bound excludes 0; the knee is the stratum before it. "
    "Hinge fit (WLS on log2 tokens, BIC against a line) and Kneedle (gated) are cross-checks.",
    "saturation": "Smallest stratum after which no later stratum's paired gain has an upper "
    "bound ≥ ε.",
    "reliability": "pass^k: the unbiased per-task estimate C(c, k)/C(R, k), averaged over tasks.",
    "limit": "Weakest family's min(knee, lower ECL at the consequence's confidence) × the "
    "consequence margin, rounded down to a tested stratum; never above a stratum that passed.",
}


def analyse_sweep(
    frame: pd.DataFrame,
    params: AnalysisParams,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> SweepResult:
    """Analyse every family, then all tasks pooled, then propose a production limit."""
    params.validate()
    families = sorted(frame["family"].unique()) if len(frame) else []
    strata = sorted(int(s) for s in frame["stratum"].unique()) if len(frame) else []
    total_steps = len(families) + 1
    results = []
    for done, family in enumerate(families):
        results.append(analyse_family(family, frame[frame["family"] == family], params))
        if progress:
            progress(done + 1, total_steps, family)
    overall = None
    if families:
        pooled = frame.assign(task=frame["family"] + "/" + frame["task"])
        overall = analyse_family(OVERALL, pooled, params)
    if progress:
        progress(total_steps, total_steps, OVERALL)

    limit_families = set(params.limit_families) if params.limit_families else set(families)
    bases = [
        FamilyBasis(
            family=r.family,
            ecl_tokens=r.ecl_tokens,
            ecl_status=r.ecl_status,
            lower_ecl_tokens=r.ecl_lower_tokens,
            knee_tokens=r.knee_tokens,
            refused=bool(r.refusals),
            lower_bounds={s.tokens: s.lower_bound for s in r.strata},
        )
        for r in results
        if r.family in limit_families
    ]
    proposal = propose_limit(
        bases,
        strata,
        consequence=params.consequence,
        margin_factor=params.margin_factor,
        confidence=params.lower_ecl_confidence,
    )
    reasons = [refusal for r in results for refusal in r.refusals]
    if not families:
        reasons = check_refusals(
            family="sweep", tasks=[], strata=[], repeats=np.zeros((0, 0)), theta=params.threshold,
            alpha=params.alpha, interval_method=params.interval_method,
            min_repeats=params.min_repeats,
        )  # fmt: skip
    blocking = [r for r in reasons if r.family in limit_families or not families]
    return SweepResult(
        status="insufficient" if blocking else "ok",
        reasons=reasons,
        families=results,
        overall=overall,
        weakest_family=proposal.weakest_family,
        proposed_limit_tokens=proposal.tokens,
        proposal=asdict(proposal),
        strata=strata,
        trials=len(frame),
        params=params.as_dict(),
        methods=METHOD_NOTES,
        weakest_family_reason=proposal.weakest_reason,
    )


def _shift(old: int | None, new: int | None) -> float | None:
    if not old or not new:
        return None
    return math.log2(new / old)


def requalification_shifts(current: dict, previous: dict) -> list[dict]:
    """Per family, how the ECL and knee moved from the superseded qualification to this one.

    Shifts are in doublings (log2 new/old); None where either side has no value.
    """
    old = {f["family"]: f for f in previous["families"]}
    shifts = []
    for family in current["families"]:
        before = old.get(family["family"])
        if before is None:
            shifts.append({"family": family["family"], "new_family": True})
            continue
        shifts.append(
            {
                "family": family["family"],
                "new_family": False,
                "ecl_before": before["ecl_text"],
                "ecl_after": family["ecl_text"],
                "ecl_shift_doublings": _shift(before["ecl_tokens"], family["ecl_tokens"]),
                "ecl_lower95_before": before["ecl_lower95_tokens"],
                "ecl_lower95_after": family["ecl_lower95_tokens"],
                "knee_before": before["knee_tokens"],
                "knee_after": family["knee_tokens"],
                "knee_shift_doublings": _shift(before["knee_tokens"], family["knee_tokens"]),
            }
        )
    return shifts
