"""Synthetic sweeps from planted per-family curves: for tests, benchmarks and the demo.

Each task gets a difficulty offset on the logit scale, so repeats of a task are correlated
the way real ones are; trials are then independent Bernoulli draws around the planted curve.
"""

from __future__ import annotations

import math

import numpy as np


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def simulate_sweep(
    curves: dict[str, list[float]],
    strata: list[int],
    *,
    tasks: int = 40,
    repeats: int = 5,
    seed: int = 7,
    task_spread: float = 0.0,
    retrieval_lift: float = 0.04,
    cost_per_mtok: float | None = 3.0,
) -> list[dict]:
    """Rows with the trial upload's field names: one per family × task × stratum × repeat."""
    rng = np.random.default_rng(seed)
    rows = []
    for family, curve in curves.items():
        if len(curve) != len(strata):
            raise ValueError(f"{family}: {len(curve)} accuracies for {len(strata)} strata")
        offsets = rng.normal(0.0, task_spread, size=tasks) if task_spread else np.zeros(tasks)
        for t in range(tasks):
            task_id = f"{family[:4]}-{t + 1:03d}"
            for stratum, p in zip(strata, curve, strict=True):
                p_task = 1 / (1 + math.exp(-(_logit(p) + offsets[t])))
                p_retrieval = min(1.0, p_task + retrieval_lift)
                for r in range(repeats):
                    correct = bool(rng.random() < p_task)
                    retrieved = bool(correct or rng.random() < p_retrieval - p_task)
                    input_tokens = int(stratum * rng.uniform(0.92, 1.0))
                    output_tokens = int(rng.gamma(4.0, 400.0))
                    rows.append(
                        {
                            "task_id": task_id,
                            "family": family,
                            "stratum_tokens": stratum,
                            "repeat": r,
                            "retrieval_correct": retrieved,
                            "task_correct": correct,
                            "input_tokens": input_tokens,
                            "output_tokens": output_tokens,
                            "model_calls": int(1 + rng.poisson(2 + stratum / 32000)),
                            "tool_calls": int(rng.poisson(3 + stratum / 20000)),
                            "cost_usd": round(
                                (input_tokens + 5 * output_tokens) * cost_per_mtok / 1e6, 6
                            )
                            if cost_per_mtok
                            else None,
                            "latency_ms": int(800 + input_tokens / 40 + rng.exponential(500)),
                        }
                    )
    return rows


def analysis_rows(rows: list[dict]) -> list[tuple]:
    """Upload-shaped rows → the tuples `sweep.trials_frame` takes (COLUMNS order)."""
    return [
        (
            r["family"],
            r["task_id"],
            r["stratum_tokens"],
            r["repeat"],
            1.0 if r["task_correct"] else 0.0,
            None if r.get("retrieval_correct") is None else float(r["retrieval_correct"]),
            r["input_tokens"],
            r["output_tokens"],
            r.get("model_calls"),
            r.get("tool_calls"),
            r.get("cost_usd"),
            r.get("latency_ms"),
        )
        for r in rows
    ]
