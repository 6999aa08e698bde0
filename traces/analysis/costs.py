"""What context cost: cumulative cost curve with a power-law fit, growth per step, read
amplification and steps per agent (seed 001 §4, METHODS.md §5). Pure: no Django.

Inputs are column arrays (`CallColumns`), one row per deduplicated call, sorted by agent
and then by the agent's own call order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import optimize, stats

BAND = 25_000


@dataclass
class CallColumns:
    agent: np.ndarray  # int64, sorted ascending, calls of an agent contiguous and in order
    run: np.ndarray  # int64 run id per call (-1 when unknown)
    context: np.ndarray  # int64 prompt size of the call
    billed: np.ndarray  # int64 input + cache creation + cache read + output
    output: np.ndarray  # int64
    timestamp: np.ndarray  # float64 seconds since the epoch

    def __len__(self) -> int:
        return len(self.agent)

    @classmethod
    def empty(cls) -> CallColumns:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z, z, np.zeros(0))


def agent_starts(agent: np.ndarray) -> np.ndarray:
    """Index of the first call of each agent."""
    if len(agent) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, agent[1:] != agent[:-1]])


def grouped_cumsum(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    total = np.cumsum(values, dtype=np.float64)
    offsets = np.zeros(len(values))
    if len(starts):
        before = np.r_[0.0, total[starts[1:] - 1]]
        sizes = np.diff(np.r_[starts, len(values)])
        offsets = np.repeat(before, sizes)
    return total - offsets


def grouped_running_max(values: np.ndarray, agent: np.ndarray) -> np.ndarray:
    """Running maximum that restarts at each agent (values are non-negative)."""
    if len(values) == 0:
        return values.astype(np.float64)
    # Offset each agent far above the previous one, take a global running max, remove the offset.
    codes = np.cumsum(np.r_[0, agent[1:] != agent[:-1]])
    span = float(values.max()) + 1.0
    shifted = values.astype(np.float64) + codes * span
    return np.maximum.accumulate(shifted) - codes * span


@dataclass
class PowerFit:
    exponent: float
    ci: tuple[float, float]
    r_squared: float
    n_points: int
    intercept: float
    curve_fit_exponent: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def power_fit(x: np.ndarray, y: np.ndarray, level: float = 0.95) -> PowerFit | None:
    """OLS of log y on log x (METHODS §5): the exponent with its t-interval and R²."""
    keep = (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    if len(x) < 3:
        return None
    fit = stats.linregress(np.log(x), np.log(y))
    t = stats.t.ppf(0.5 + level / 2, len(x) - 2)
    half = t * fit.stderr
    curve = None
    try:
        params, _ = optimize.curve_fit(
            lambda v, a, b: a * v**b, x / x.max(), y / y.max(), p0=(1.0, fit.slope), maxfev=5000
        )
        curve = float(params[1])
    except (RuntimeError, ValueError, optimize.OptimizeWarning):
        curve = None
    return PowerFit(
        float(fit.slope),
        (float(fit.slope - half), float(fit.slope + half)),
        float(fit.rvalue**2),
        len(x),
        float(fit.intercept),
        curve,
    )


@dataclass
class CostCurve:
    band: int
    bands: list[int]  # lower edge of each band reached (tokens)
    median_cost: list[float]
    agents: list[int]  # n agents reaching each band
    fit: PowerFit | None
    subranges: list[dict]
    regime_change: bool
    min_agents: int
    message: str = ""
    reached: list[float] = field(default_factory=list)  # median context at the crossing call

    def as_dict(self) -> dict:
        data = asdict(self)
        data["fit"] = self.fit.as_dict() if self.fit else None
        return data


def cost_curve(cols: CallColumns, band: int = BAND, min_agents: int = 3) -> CostCurve:
    """For each agent, the cumulative tokens billed when it first reaches each band, and the
    context that call actually reached; the medians across agents per band; a log-log
    power-law fit of cost on the reached context, and refits on the lower and upper halves,
    flagged when their intervals do not overlap.

    An agent's first call counts for no band: the bands it starts in or above were not
    climbed, and placing them at their edges bent the fit (an exact 2.55 law from a 30k
    start gave 2.488 [2.457, 2.520])."""
    if len(cols) == 0:
        return CostCurve(
            band, [], [], [], None, [], False, min_agents, "No calls match these filters."
        )
    starts = agent_starts(cols.agent)
    cumulative = grouped_cumsum(cols.billed, starts)
    running = grouped_running_max(cols.context, cols.agent)
    reached = (running // band).astype(np.int64)
    previous = np.r_[-1, reached[:-1]]
    previous[starts] = reached[starts]
    rises = np.flatnonzero(reached > previous)
    per_band: dict[int, list[float]] = {}
    per_band_context: dict[int, list[float]] = {}
    for index in rises:
        for b in range(int(previous[index]) + 1, int(reached[index]) + 1):
            per_band.setdefault(b, []).append(float(cumulative[index]))
            per_band_context.setdefault(b, []).append(float(running[index]))
    bands = sorted(b for b, values in per_band.items() if len(values) >= min_agents)
    edges = [b * band for b in bands]
    medians = [float(np.median(per_band[b])) for b in bands]
    counts = [len(per_band[b]) for b in bands]
    contexts = [float(np.median(per_band_context[b])) for b in bands]
    x, y = np.array(contexts), np.array(medians)
    fit = power_fit(x, y)
    subranges = []
    regime = False
    if len(x) >= 6:
        half = len(x) // 2
        parts = [("lower half", slice(0, half)), ("upper half", slice(half, None))]
        for name, part in parts:
            sub = power_fit(x[part], y[part])
            if sub:
                subranges.append(
                    {
                        "range": name,
                        "from": float(x[part][0]),
                        "to": float(x[part][-1]),
                        **sub.as_dict(),
                    }
                )
        if len(subranges) == 2:
            (a_lo, a_hi), (b_lo, b_hi) = subranges[0]["ci"], subranges[1]["ci"]
            regime = a_hi < b_lo or b_hi < a_lo
    message = (
        ""
        if fit
        else f"Fewer than 3 bands are reached by at least {min_agents} agents: no power law can be fitted."
    )
    return CostCurve(
        band, edges, medians, counts, fit, subranges, regime, min_agents, message, contexts
    )


@dataclass
class BandStat:
    band: int
    n: int
    median: float
    mean: float


@dataclass
class GrowthByBand:
    band: int
    rows: list[BandStat] = field(default_factory=list)
    message: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def step_deltas(cols: CallColumns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(context before, growth, run) for consecutive calls of the same agent and run."""
    if len(cols) < 2:
        empty = np.zeros(0)
        return empty, empty, empty.astype(np.int64)
    same = (cols.agent[1:] == cols.agent[:-1]) & (cols.run[1:] == cols.run[:-1])
    before = cols.context[:-1][same].astype(np.float64)
    growth = (cols.context[1:] - cols.context[:-1])[same].astype(np.float64)
    return before, growth, cols.run[1:][same]


def growth_by_band(cols: CallColumns, band: int = BAND, min_steps: int = 5) -> GrowthByBand:
    """Tokens of context added per call, by the band of the context it started from."""
    before, growth, _ = step_deltas(cols)
    if len(growth) == 0:
        return GrowthByBand(band, [], "Too few consecutive calls to measure growth.")
    codes = (before // band).astype(np.int64)
    rows = []
    for code in np.unique(codes):
        values = growth[codes == code]
        if len(values) >= min_steps:
            rows.append(
                BandStat(
                    int(code * band), len(values), float(np.median(values)), float(values.mean())
                )
            )
    return GrowthByBand(band, rows)


@dataclass
class Amplification:
    band: int
    rows: list[dict]
    minimum_band: int | None
    message: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def read_amplification(cols: CallColumns, band: int = BAND, min_calls: int = 5) -> Amplification:
    """Tokens read ÷ tokens output, by context band (a ratio of sums); the minimum marked."""
    if len(cols) == 0:
        return Amplification(band, [], None, "No calls match these filters.")
    codes = (cols.context // band).astype(np.int64)
    read = np.bincount(codes, weights=cols.context.astype(np.float64))
    out = np.bincount(codes, weights=cols.output.astype(np.float64))
    n = np.bincount(codes)
    rows = []
    for code in np.flatnonzero(n >= min_calls):
        if out[code] > 0:
            rows.append({"band": int(code * band), "n": int(n[code]), "ratio": float(read[code] / out[code]),
                         "read": float(read[code]), "output": float(out[code])})  # fmt: skip
    minimum = min(rows, key=lambda r: r["ratio"])["band"] if rows else None
    return Amplification(
        band, rows, minimum, "" if rows else "No band has enough calls with output."
    )


# A median and p90 need at least 10 agents; a p99 drawn from fewer than 100 is the maximum.
MIN_AGENTS_STEPS = 10
MIN_AGENTS_P99 = 100


def _agents(n: int) -> str:
    return f"{n} agent" if n == 1 else f"{n} agents"


@dataclass
class StepStats:
    group: str
    agents: int
    calls: int
    median: float | None
    p90: float | None
    p99: float | None
    max: int | None
    top_decile_share: float | None
    histogram: list[int] = field(default_factory=list)  # calls per agent, for the chart
    message: str = ""


def step_distribution(
    calls_per_agent: np.ndarray,
    group: str,
    min_agents: int = MIN_AGENTS_STEPS,
    min_agents_p99: int = MIN_AGENTS_P99,
) -> StepStats:
    """Calls per agent: median, p90, p99, max, and the share of calls taken by the top 10%
    of agents; nothing but the counts below `min_agents`, no p99 below `min_agents_p99`."""
    counts = np.sort(np.asarray(calls_per_agent, dtype=np.int64))
    if len(counts) < min_agents:
        message = (
            f"Only {_agents(len(counts))} (fewer than {min_agents}): no distribution of steps."
            if len(counts)
            else "No agents in this group."
        )
        return StepStats(group, len(counts), int(counts.sum()), None, None, None, None, None, [], message)  # fmt: skip
    top = max(1, math.ceil(len(counts) / 10))
    enough_for_p99 = len(counts) >= min_agents_p99
    return StepStats(
        group=group,
        agents=len(counts),
        calls=int(counts.sum()),
        median=float(np.median(counts)),
        p90=float(np.percentile(counts, 90)),
        p99=float(np.percentile(counts, 99)) if enough_for_p99 else None,
        max=int(counts[-1]),
        top_decile_share=float(counts[-top:].sum() / counts.sum()),
        histogram=counts.tolist(),
        message="" if enough_for_p99 else f"p99 needs at least {min_agents_p99} agents.",
    )
