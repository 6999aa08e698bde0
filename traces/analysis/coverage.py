"""Reference-distance coverage (seed 001 §5.2). Pure: no Django.

A repeat reference is a touch of a file path that the same agent touched before. Its
distance is the context the agent took in between the two touches (the difference of
their token positions). Distances are reset at compaction boundaries: a repeat whose
previous touch lies before a compaction is beyond any window (the earlier read was
summarised away), so coverage tends to an asymptote below 100%. Coverage of a window W
is the share of repeat references with distance ≤ W.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from traces.analysis.cycle import CycleParams, cost_per_step

# Below this many repeat references a coverage share moves by ≥ 3 points per reference and
# the "asymptote" is one or two references: no curve is drawn.
MIN_REPEATS = 30

DEFAULT_GRID = [
    5_000, 10_000, 20_000, 30_000, 50_000, 75_000, 100_000, 125_000, 150_000, 175_000, 200_000,
    240_000, 300_000, 400_000, 500_000, 600_000, 750_000, 1_000_000,
]  # fmt: skip


@dataclass
class TouchColumns:
    agent: np.ndarray  # int64
    run: np.ndarray  # int64 run index within the agent
    path: np.ndarray  # int64 path code
    position: np.ndarray  # int64 token position


@dataclass
class Coverage:
    repeats: int
    within_run: int
    median_distance: float | None
    asymptote: float | None
    grid: list[int]
    coverage: list[float]
    best_per_cost: int | None
    best_per_cost_method: str
    message: str = ""
    per_cost: list[float | None] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def repeat_distances(touches: TouchColumns) -> tuple[np.ndarray, int]:
    """Distances of within-run repeat references, and the number of all repeat references."""
    if len(touches.agent) < 2:
        return np.zeros(0), 0
    order = np.lexsort((touches.position, touches.path, touches.agent))
    agent, run, path, position = (
        touches.agent[order],
        touches.run[order],
        touches.path[order],
        touches.position[order],
    )
    repeat = (agent[1:] == agent[:-1]) & (path[1:] == path[:-1])
    same_run = repeat & (run[1:] == run[:-1])
    distances = (position[1:] - position[:-1])[same_run].astype(np.float64)
    return distances, int(repeat.sum())


def coverage(
    touches: TouchColumns,
    grid: list[int] | None = None,
    cycle: CycleParams | None = None,
    min_repeats: int = MIN_REPEATS,
) -> Coverage:
    grid = grid or DEFAULT_GRID
    distances, repeats = repeat_distances(touches)
    if repeats < min_repeats:
        message = (
            "No file was touched twice by the same agent: no repeat references."
            if repeats == 0
            else f"Only {repeats} repeat reference{'' if repeats == 1 else 's'} (fewer than {min_repeats}): "
            "coverage and its asymptote cannot be estimated."
        )
        return Coverage(repeats, len(distances), None, None, grid, [], None, "", message)
    shares = [float((distances <= w).sum() / repeats) for w in grid]
    best, per_cost, method = None, [], "needs measured cycle parameters"
    if cycle is not None:
        costs = cost_per_step(np.array(grid, dtype=float), cycle)
        per_cost = [
            float(s / c) if np.isfinite(c) and c > 0 else None
            for s, c in zip(shares, costs, strict=True)
        ]
        candidates = [(v, w) for v, w in zip(per_cost, grid, strict=True) if v is not None]
        if candidates:
            best = max(candidates)[1]
        method = "coverage(W) ÷ f(W), f the amortised tokens per productive step of the cycle model at threshold W"
    return Coverage(
        repeats=repeats,
        within_run=len(distances),
        median_distance=float(np.median(distances)) if len(distances) else None,
        asymptote=len(distances) / repeats,
        grid=grid,
        coverage=shares,
        best_per_cost=best,
        best_per_cost_method=method,
        per_cost=per_cost,
    )
