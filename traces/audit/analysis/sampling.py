"""Stratified, seeded sampling of runs and of the steps within them (seed 001 §6.1). Pure.

A run's stratum is its task type × the context band of its median window (seed 001 §2.3
bands runs by their median). Each stratum gives the number of runs asked for it (or all it
has); each sampled run gives up to three steps, drawn from its calls. The same runs, sizes
and seed always give the same sample: strata are visited in sorted order, runs in id order,
each stratum draws from a generator seeded by (seed, CRC-32 of its key) and a run's steps
from one seeded by (seed, run id), so adding runs to one stratum never changes another
stratum's sample.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# The seed's bands: below 50k, 50k–150k, 150k–350k, 350k–600k, 600k and above.
DEFAULT_BAND_EDGES: tuple[int, ...] = (50_000, 150_000, 350_000, 600_000)
STEPS_PER_RUN = 3


@dataclass(frozen=True)
class RunInfo:
    """What sampling needs of a run: its id, task type, median window and number of calls."""

    run_id: int
    task_type: str
    median_context: int
    call_count: int


@dataclass(frozen=True)
class SampledRun:
    run_id: int
    task_type: str
    band: str
    step_positions: tuple[int, ...]  # 0-based positions among the run's calls, ascending


def band_label(low: int, high: int | None) -> str:
    def short(value: int) -> str:
        return f"{value // 1000}k" if value % 1000 == 0 else f"{value:,}"

    if high is None:
        return f"≥{short(low)}"
    if low == 0:
        return f"<{short(high)}"
    return f"{short(low)}–{short(high)}"


def band_labels(edges: Sequence[int] = DEFAULT_BAND_EDGES) -> list[str]:
    bounds = [0, *edges]
    return [
        band_label(low, bounds[i + 1] if i + 1 < len(bounds) else None)
        for i, low in enumerate(bounds)
    ]


def band_of(tokens: int, edges: Sequence[int] = DEFAULT_BAND_EDGES) -> str:
    """The label of the band [edge_k, edge_k+1) holding `tokens`."""
    labels = band_labels(edges)
    for i, edge in enumerate(edges):
        if tokens < edge:
            return labels[i]
    return labels[-1]


def stratum_key(task_type: str, band: str) -> str:
    return f"{task_type}|{band}"


def strata_counts(
    runs: Iterable[RunInfo], edges: Sequence[int] = DEFAULT_BAND_EDGES
) -> dict[str, int]:
    """Runs available in each stratum ('task_type|band')."""
    counts: dict[str, int] = defaultdict(int)
    for run in runs:
        counts[stratum_key(run.task_type, band_of(run.median_context, edges))] += 1
    return dict(counts)


def choose_steps(run: RunInfo, *, seed: int, k: int = STEPS_PER_RUN) -> tuple[int, ...]:
    """Up to k distinct positions among the run's calls, ascending, from a generator seeded
    by (seed, run id)."""
    if run.call_count <= k:
        return tuple(range(run.call_count))
    rng = np.random.default_rng([seed, run.run_id])
    return tuple(sorted(int(i) for i in rng.choice(run.call_count, size=k, replace=False)))


def sample_runs(
    runs: Iterable[RunInfo],
    sizes: Mapping[str, int],
    *,
    seed: int,
    edges: Sequence[int] = DEFAULT_BAND_EDGES,
    steps_per_run: int = STEPS_PER_RUN,
) -> list[SampledRun]:
    """For each stratum in `sizes`, min(size, available) runs drawn without replacement."""
    by_stratum: dict[str, list[RunInfo]] = defaultdict(list)
    for run in runs:
        by_stratum[stratum_key(run.task_type, band_of(run.median_context, edges))].append(run)
    sampled: list[SampledRun] = []
    for key in sorted(sizes):
        size = int(sizes[key])
        if size < 0:
            raise ValueError(f"stratum {key}: size must be 0 or more, not {size}")
        pool = sorted(by_stratum.get(key, []), key=lambda r: r.run_id)
        if not pool or size == 0:
            continue
        take = min(size, len(pool))
        rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
        chosen = sorted(rng.choice(len(pool), size=take, replace=False))
        for i in chosen:
            run = pool[int(i)]
            task_type, _, band = key.partition("|")
            sampled.append(
                SampledRun(
                    run.run_id, task_type, band, choose_steps(run, seed=seed, k=steps_per_run)
                )
            )
    return sampled
