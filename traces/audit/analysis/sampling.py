"""Stratified, seeded sampling of steps, three to a run (seed 001 §6.1). Pure.

The sampled unit is a step (a call). A step's stratum is its run's task type × the context
band of **its own** window (the call's context tokens): seed 001 §6.1 stratifies "by the
context actually present at that step", so a run that climbs from 30k to 400k offers steps to
four bands. A stratum's size counts steps. They are drawn in clusters of up to three from one
run, because a judge packet presents one run with three sampled steps (§6.1):

- the stratum's runs (those with at least one step in the band) are put in a seeded random
  order, each run equally likely to come first;
- each run in turn gives min(3, its steps in the band, steps still wanted) distinct steps, drawn
  among its steps in the band, each equally likely;
- so a stratum can give at most Σ min(3, a run's steps in the band) steps (`strata_counts`).

A run drawn in several strata (it crosses bands) makes one packet holding each stratum's
steps; each step keeps the band of its own window. The same runs, sizes and seed always give
the same sample: strata are visited in sorted order, a stratum's runs are ordered by a
generator seeded by (seed, CRC-32 of its key) and a run's steps in a band by one seeded by
(seed, run id, CRC-32 of the band), so adding runs to one stratum never changes another
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
    """What sampling needs of a run: its id, task type, median window and the context tokens of
    its calls in order (position i is the run's i-th call)."""

    run_id: int
    task_type: str
    median_context: int
    contexts: tuple[int, ...]

    @property
    def call_count(self) -> int:
        return len(self.contexts)


@dataclass(frozen=True)
class SampledRun:
    """One packet's worth: a run and the positions of its sampled steps."""

    run_id: int
    task_type: str
    band: str  # the band of the run's median window (shown beside the packet)
    step_positions: tuple[int, ...]  # 0-based positions among the run's calls, ascending
    step_bands: tuple[str, ...]  # the stratum band of each position (its own window's band)


@dataclass(frozen=True)
class StratumAvailability:
    steps: int  # steps in the band
    drawable: int  # Σ min(3, a run's steps in the band): what the stratum can give
    runs: int  # runs with at least one step in the band


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


def positions_by_band(
    run: RunInfo, edges: Sequence[int] = DEFAULT_BAND_EDGES
) -> dict[str, list[int]]:
    """The run's call positions grouped by the band of each call's own window."""
    labels = band_labels(edges)
    index = np.searchsorted(np.asarray(edges, dtype=np.int64), run.contexts, side="right")
    grouped: dict[str, list[int]] = {}
    for band_index in np.unique(index):
        grouped[labels[int(band_index)]] = np.flatnonzero(index == band_index).tolist()
    return grouped


def _pools(
    runs: Iterable[RunInfo], edges: Sequence[int]
) -> dict[str, list[tuple[RunInfo, list[int]]]]:
    pools: dict[str, list[tuple[RunInfo, list[int]]]] = defaultdict(list)
    for run in runs:
        for band, positions in positions_by_band(run, edges).items():
            pools[stratum_key(run.task_type, band)].append((run, positions))
    return pools


def strata_availability(
    runs: Iterable[RunInfo],
    edges: Sequence[int] = DEFAULT_BAND_EDGES,
    steps_per_run: int = STEPS_PER_RUN,
) -> dict[str, StratumAvailability]:
    """Per stratum ('task_type|band'): its steps, the steps it can give, and its runs."""
    return {
        key: StratumAvailability(
            steps=sum(len(p) for _, p in pool),
            drawable=sum(min(steps_per_run, len(p)) for _, p in pool),
            runs=len(pool),
        )
        for key, pool in _pools(runs, edges).items()
    }


def strata_counts(
    runs: Iterable[RunInfo],
    edges: Sequence[int] = DEFAULT_BAND_EDGES,
    steps_per_run: int = STEPS_PER_RUN,
) -> dict[str, int]:
    """The steps each stratum can give (at most three from one run)."""
    return {
        key: available.drawable
        for key, available in strata_availability(runs, edges, steps_per_run).items()
    }


def _draw_stratum(
    key: str, pool: list[tuple[RunInfo, list[int]]], size: int, *, seed: int, per_run: int
) -> list[tuple[RunInfo, list[int]]]:
    """`size` steps (or all the stratum can give) as (run, positions) clusters."""
    band = key.partition("|")[2]
    pool = sorted(pool, key=lambda entry: entry[0].run_id)
    order = np.random.default_rng([seed, zlib.crc32(key.encode())]).permutation(len(pool))
    drawn, wanted = [], size
    for i in order:
        if wanted <= 0:
            break
        run, positions = pool[int(i)]
        take = min(per_run, len(positions), wanted)
        rng = np.random.default_rng([seed, run.run_id, zlib.crc32(band.encode())])
        chosen = sorted(int(positions[j]) for j in rng.choice(len(positions), take, replace=False))
        drawn.append((run, chosen))
        wanted -= take
    return drawn


def sample_steps(
    runs: Iterable[RunInfo],
    sizes: Mapping[str, int],
    *,
    seed: int,
    edges: Sequence[int] = DEFAULT_BAND_EDGES,
    steps_per_run: int = STEPS_PER_RUN,
) -> list[SampledRun]:
    """For each stratum in `sizes`, min(size, what it can give) steps, three or fewer from a
    run; one SampledRun per run drawn, in the order runs were first drawn."""
    for key, size in sizes.items():
        if int(size) < 0:
            raise ValueError(f"stratum {key}: size must be 0 or more, not {size}")
    pools = _pools(runs, edges)
    by_run: dict[int, tuple[RunInfo, dict[int, str]]] = {}
    for key in sorted(sizes):
        size = int(sizes[key])
        if size == 0 or key not in pools:
            continue
        band = key.partition("|")[2]
        for run, chosen in _draw_stratum(key, pools[key], size, seed=seed, per_run=steps_per_run):
            by_run.setdefault(run.run_id, (run, {}))[1].update(dict.fromkeys(chosen, band))
    sampled = []
    for run, bands in by_run.values():
        positions = tuple(sorted(bands))
        sampled.append(
            SampledRun(
                run.run_id,
                run.task_type,
                band_of(run.median_context, edges),
                positions,
                tuple(bands[p] for p in positions),
            )
        )
    return sampled
