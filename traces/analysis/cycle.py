"""The compaction cycle model (seed 001 §5.1, METHODS.md §6). Pure: no Django.

A session under threshold T grows from post-compaction size S at D tokens per step,
compacts (cost T + SUMM), then loses P steps to rediscovery:

    n(T) = (T − S) / D
    f(T) = [ n·(S + T)/2 + (T + SUMM) + P·S ] / (n − P)        (valid when n > P)

f is the amortised tokens per productive step. Its minimum has a closed form:

    T* = S + P·D + √(D·[(P² + 2P)·D + 4P·S + 2S + 2·SUMM]),   f(T*) = T* + D

Per cycle (seed 001 §7.3, §8): the window climbs linearly from S to T, so its mean over the
cycle is (S + T)/2; a cycle lasts n steps; and a disruption of L steps after each
compaction puts min(L, n)/n of all steps inside the degraded region (L = 30: 29% at 220k,
9% at 577k). A preserved verbatim tail lands the session at S + tail, with its own P.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

WITHIN = 1.10
# Upper bounds on the inputs, far beyond any real session (today's largest windows hold
# 1–2M tokens) and low enough that no intermediate value overflows a float: P²·D stays
# under 1e18. Each is enforced in `validate` with the field named.
MAX_TOKENS = 100_000_000  # S, SUMM, any threshold T, a preserved tail
MAX_GROWTH = 10_000_000  # D, tokens per step
MAX_PENALTY = 100_000  # P, steps; also L, the disruption length
# Seed 001 §7.3: "a 30-step disruption"; the fallback when no measured length exists.
DEFAULT_DISRUPTION_STEPS = 30


class CycleInputError(ValueError):
    """Parameters for which the model is undefined; `field` names the culprit."""

    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name


@dataclass(frozen=True)
class CycleParams:
    post_compaction: float  # S
    growth_per_step: float  # D
    summary: float  # SUMM
    penalty_steps: float  # P

    def validate(self) -> None:
        _check(
            "growth_per_step",
            "D (growth per step)",
            self.growth_per_step,
            MAX_GROWTH,
            zero_ok=False,
        )
        _check("penalty_steps", "P (penalty steps)", self.penalty_steps, MAX_PENALTY, zero_ok=True)
        _check(
            "post_compaction_tokens",
            "S (post-compaction tokens)",
            self.post_compaction,
            MAX_TOKENS,
            zero_ok=False,
        )
        _check("summary_tokens", "SUMM (summary tokens)", self.summary, MAX_TOKENS, zero_ok=True)


def _check(field_name: str, label: str, value: float, upper: float, *, zero_ok: bool) -> None:
    lower = "0 or more" if zero_ok else "greater than 0"
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise CycleInputError(field_name, f"{label} must be {lower}.")
    if value > upper:
        raise CycleInputError(field_name, f"{label} must be at most {upper:,}.")


def steps_per_cycle(threshold, p: CycleParams):
    return (np.asarray(threshold, dtype=float) - p.post_compaction) / p.growth_per_step


def mean_window(threshold, p: CycleParams):
    """The mean window over a cycle, (S + T)/2: the window climbs linearly from S to T
    (seed 001 §8: 482,794 at 900k against 189,794 at 314k)."""
    return (p.post_compaction + np.asarray(threshold, dtype=float)) / 2


def degraded_share(threshold, p: CycleParams, disruption_steps: float):
    """The share of all steps spent within L = `disruption_steps` steps after a compaction:
    min(L, n)/n, with n the steps per cycle (seed 001 §7.3: L = 30 gives 29% at 220k)."""
    n = steps_per_cycle(threshold, p)
    return np.minimum(float(disruption_steps), n) / n


def check_disruption_steps(value: float) -> None:
    _check("disruption_steps", "L (disruption steps)", value, MAX_PENALTY, zero_ok=True)


def cost_per_step(threshold, p: CycleParams):
    """f(T); NaN where the cycle returns no productive work (n ≤ P)."""
    t = np.asarray(threshold, dtype=float)
    n = (t - p.post_compaction) / p.growth_per_step
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (
            n * (p.post_compaction + t) / 2 + (t + p.summary) + p.penalty_steps * p.post_compaction
        ) / (n - p.penalty_steps)
    return np.where(n > p.penalty_steps, value, np.nan)


def optimum(p: CycleParams) -> float:
    s, d, summ, pen = p.post_compaction, p.growth_per_step, p.summary, p.penalty_steps
    return s + pen * d + math.sqrt(d * ((pen**2 + 2 * pen) * d + 4 * pen * s + 2 * s + 2 * summ))


def floor_threshold(p: CycleParams) -> float:
    """Below S + P·D the cycle returns no productive work."""
    return p.post_compaction + p.penalty_steps * p.growth_per_step


def within_region(p: CycleParams, factor: float = WITHIN) -> tuple[float, float]:
    """Thresholds where f(T) ≤ factor·f(T*): f(T) = c has two roots of a quadratic in T."""
    s, d, summ, pen = p.post_compaction, p.growth_per_step, p.summary, p.penalty_steps
    c = factor * (optimum(p) + d)
    # f(T) = c  ⇔  (T−S)(S+T)/(2D) + T + SUMM + P·S = c·((T−S)/D − P)
    # multiply by 2D: T² − S² + 2D·T + 2D·SUMM + 2D·P·S = 2c(T − S) − 2c·P·D
    a = 1.0
    b = 2 * d - 2 * c
    k = -(s**2) + 2 * d * summ + 2 * d * pen * s + 2 * c * s + 2 * c * pen * d
    disc = b * b - 4 * a * k
    root = math.sqrt(max(disc, 0.0))
    return (-b - root) / 2, (-b + root) / 2


@dataclass(frozen=True)
class ThresholdRatio:
    """f(T) and f(T)/f(T*) at one threshold (both None at or below the floor S + P·D), with
    the cycle's steps n, mean window (S + T)/2 and the share of steps in the degraded
    region, min(L, n)/n, which exist at any T above S."""

    threshold: int
    cost_per_step: float | None
    ratio: float | None
    below_floor: bool
    reason: str | None
    steps_per_cycle: float | None = None
    mean_window: float | None = None
    degraded_share: float | None = None

    def as_dict(self) -> dict:
        return {
            "threshold": self.threshold,
            "cost_per_step": None if self.cost_per_step is None else round(self.cost_per_step, 1),
            "ratio": None if self.ratio is None else round(self.ratio, 4),
            "below_floor": self.below_floor,
            "reason": self.reason,
            "steps_per_cycle": _rounded(self.steps_per_cycle, 2),
            "mean_window": _rounded(self.mean_window, 1),
            "degraded_share": _rounded(self.degraded_share, 4),
        }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@dataclass
class CycleResult:
    params: CycleParams
    optimum_threshold: float
    optimum_cost_per_step: float
    within_10pct: tuple[float, float]
    floor_threshold: float
    curve: list[tuple[float, float]]
    at_thresholds: list[ThresholdRatio] = field(default_factory=list)

    @property
    def ratios(self) -> dict[int, float | None]:
        """f(T)/f(T*) keyed by the exact threshold in tokens (None below the floor)."""
        return {row.threshold: row.ratio for row in self.at_thresholds}

    def as_dict(self) -> dict:
        # `ratios` keys are the thresholds as exact integers in decimal ("1000000", never
        # "1e+06"), so two thresholds one token apart never share a key.
        return {
            "optimum_threshold": round(self.optimum_threshold, 1),
            "optimum_cost_per_step": round(self.optimum_cost_per_step, 1),
            "within_10pct": [round(self.within_10pct[0], 1), round(self.within_10pct[1], 1)],
            "floor_threshold": round(self.floor_threshold, 1),
            "curve": [[round(t, 1), round(f, 1)] for t, f in self.curve],
            "ratios": {str(row.threshold): row.as_dict()["ratio"] for row in self.at_thresholds},
            "at_thresholds": [row.as_dict() for row in self.at_thresholds],
        }


def threshold_tokens(threshold: float, p: CycleParams) -> int:
    """A threshold as whole tokens, refused (naming `thresholds`) unless S < T ≤ MAX_TOKENS."""
    if not math.isfinite(threshold) or threshold > MAX_TOKENS:
        raise CycleInputError(
            "thresholds", f"each threshold must be at most {MAX_TOKENS:,} tokens."
        )
    tokens = round(threshold)
    if tokens <= p.post_compaction:
        raise CycleInputError(
            "thresholds", f"threshold {tokens:,} must be above S ({p.post_compaction:,.0f})."
        )
    return tokens


def ratio_at(
    threshold: int,
    p: CycleParams,
    f_star: float,
    disruption_steps: float = DEFAULT_DISRUPTION_STEPS,
) -> ThresholdRatio:
    cycle = {
        "steps_per_cycle": float(steps_per_cycle(threshold, p)),
        "mean_window": float(mean_window(threshold, p)),
        "degraded_share": float(degraded_share(threshold, p, disruption_steps)),
    }
    value = float(cost_per_step(threshold, p))
    if math.isfinite(value):
        return ThresholdRatio(threshold, value, value / f_star, False, None, **cycle)
    return ThresholdRatio(threshold, None, None, True, _below_floor(threshold, p), **cycle)


def _below_floor(threshold: float, p: CycleParams) -> str:
    return (
        f"below floor: T = {threshold:,.0f} is at or below S + P·D = {floor_threshold(p):,.0f}, "
        "where the cycle returns no productive work, so f(T) is undefined."
    )


def evaluate(
    p: CycleParams,
    thresholds: list[float] | None = None,
    points: int = 200,
    upper: float | None = None,
    disruption_steps: float = DEFAULT_DISRUPTION_STEPS,
) -> CycleResult:
    """The curve, its optimum, the within-10% region, the floor, and at `thresholds` (whole
    tokens, in the order given, duplicates once) f(T)/f(T*) and the cycle's steps, mean
    window and degraded share for a disruption of `disruption_steps` steps."""
    p.validate()
    check_disruption_steps(disruption_steps)
    tokens = list(dict.fromkeys(threshold_tokens(t, p) for t in thresholds or []))
    t_star = optimum(p)
    f_star = float(cost_per_step(t_star, p))
    low, high = within_region(p)
    floor = floor_threshold(p)
    top = upper or max(1_000_000.0, high * 1.6, *tokens)
    grid = np.linspace(floor + p.growth_per_step, top, points)
    values = cost_per_step(grid, p)
    curve = [(float(t), float(v)) for t, v in zip(grid, values, strict=True) if math.isfinite(v)]
    rows = [ratio_at(t, p, f_star, disruption_steps) for t in tokens]
    return CycleResult(p, t_star, f_star, (low, high), floor, curve, rows)


def sensitivity(p: CycleParams, penalties: list[float]) -> list[dict]:
    """T* and its within-10% region for each penalty P (everything else fixed)."""
    rows = []
    for penalty in penalties:
        q = CycleParams(p.post_compaction, p.growth_per_step, p.summary, penalty)
        t_star = optimum(q)
        low, high = within_region(q)
        rows.append({"penalty_steps": penalty, "optimum_threshold": t_star, "optimum_cost_per_step": t_star + q.growth_per_step,
                     "within_10pct": [low, high], "floor_threshold": floor_threshold(q)})  # fmt: skip
    return rows


def tail_scenario(p: CycleParams, tail_tokens: float, tail_penalty_steps: float) -> CycleParams:
    """Preserving a verbatim tail: the session lands higher (S + tail) but re-reads less (P_tail)."""
    return CycleParams(
        p.post_compaction + tail_tokens, p.growth_per_step, p.summary, tail_penalty_steps
    )


@dataclass(frozen=True)
class Scenario:
    """One fixed policy: compact at `threshold`, keep `preserved_tail_tokens` verbatim (the
    session lands at S + tail; 0 = the bare digest) and lose `penalty_steps` steps after each
    compaction. `disruption_steps` (L) defaults to the comparison's."""

    name: str
    threshold: float
    preserved_tail_tokens: float
    penalty_steps: float
    disruption_steps: float | None = None


# Seed 001 §8.1: "a 350k threshold with a 60k preserved tail costs 25% less per unit of
# productive work than a 600k threshold with a bare digest". The seed gives neither P. The
# preset takes the measured rediscovery penalty for the bare digest (§5.1, P = 28) and half
# of it with the tail (the convention of the compactions page): 24.7% less. Other readings
# (P = 55 and 27.5: 21.0%; P = 145 and 55: 25.6%) are in docs/analytics.md.
SECTION_8_1 = (
    Scenario("600k, bare digest", 600_000, 0, 28),
    Scenario("350k, 60k preserved tail", 350_000, 60_000, 14),
)
MAX_SCENARIOS = 10


def compare_scenarios(
    base: CycleParams,
    scenarios: list[Scenario] | tuple[Scenario, ...],
    disruption_steps: float = DEFAULT_DISRUPTION_STEPS,
) -> list[dict]:
    """Each scenario under the cycle model with D and SUMM from `base`, S raised by its tail
    and its own P: steps per cycle, mean window, f(T), the degraded share, and f relative to
    the first scenario (`saving_vs_first` = 1 − ratio). Refused naming `scenarios`."""
    base.validate()
    check_disruption_steps(disruption_steps)
    if not 1 <= len(scenarios) <= MAX_SCENARIOS:
        raise CycleInputError("scenarios", f"give 1 to {MAX_SCENARIOS} scenarios.")
    rows = []
    for index, scenario in enumerate(scenarios, start=1):
        name = scenario.name or f"scenario {index}"
        label = f"scenario {index} ({name})"
        length = (
            disruption_steps if scenario.disruption_steps is None else scenario.disruption_steps
        )
        try:
            if not math.isfinite(scenario.preserved_tail_tokens) or not (
                0 <= scenario.preserved_tail_tokens <= MAX_TOKENS
            ):
                raise CycleInputError(
                    "preserved_tail_tokens",
                    f"the preserved tail must be 0 to {MAX_TOKENS:,} tokens.",
                )
            p = tail_scenario(base, scenario.preserved_tail_tokens, scenario.penalty_steps)
            p.validate()
            check_disruption_steps(length)
            threshold = threshold_tokens(scenario.threshold, p)
        except CycleInputError as exc:
            raise CycleInputError("scenarios", f"{label}: {exc}") from exc
        value = float(cost_per_step(threshold, p))
        below = not math.isfinite(value)
        rows.append(
            {
                "name": name,
                "threshold": threshold,
                "preserved_tail_tokens": scenario.preserved_tail_tokens,
                "post_compaction_tokens": p.post_compaction,
                "penalty_steps": p.penalty_steps,
                "disruption_steps": length,
                "steps_per_cycle": round(float(steps_per_cycle(threshold, p)), 2),
                "mean_window": round(float(mean_window(threshold, p)), 1),
                "cost_per_step": None if below else round(value, 1),
                "below_floor": below,
                "reason": _below_floor(threshold, p) if below else None,
                "degraded_share": round(float(degraded_share(threshold, p, length)), 4),
                "_cost": None if below else value,
            }
        )
    first = rows[0]["_cost"]
    for row in rows:
        cost = row.pop("_cost")
        ratio = cost / first if cost is not None and first is not None else None
        row["cost_ratio_to_first"] = None if ratio is None else round(ratio, 4)
        row["saving_vs_first"] = None if ratio is None else round(1 - ratio, 4)
    return rows


SEED_UNITS = (
    "tokens per 1,000 productive steps ÷ compactions per 1,000 total steps (seed 001 §7.5: "
    "mixed units, kept to reproduce the seed)"
)


@dataclass(frozen=True)
class ExchangeRate:
    from_threshold: float
    to_threshold: float
    extra_tokens_per_1000_steps: float  # per 1,000 productive steps
    disruptions_avoided_per_1000_steps: float  # per 1,000 total steps
    tokens_per_disruption_avoided: float  # the seed's figure, in its mixed units
    units: str = SEED_UNITS
    # The two consistent variants: both quantities per 1,000 productive steps, or both per
    # 1,000 total steps. {"extra_tokens", "disruptions_avoided", "tokens_per_disruption_avoided"}
    per_productive_step: dict = field(default_factory=dict)
    per_total_step: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        def rounded(value):
            if isinstance(value, dict):
                return {k: rounded(v) for k, v in value.items()}
            return round(value, 3) if isinstance(value, float) else value

        return {k: rounded(v) for k, v in self.__dict__.items()}


def _price(extra: float, avoided: float) -> dict:
    return {
        "extra_tokens": extra,
        "disruptions_avoided": avoided,
        "tokens_per_disruption_avoided": extra / avoided if avoided else math.inf,
    }


def exchange_rate(p: CycleParams, lower: float, higher: float) -> ExchangeRate:
    """Seed 001 §7.5: the extra tokens per 1,000 productive steps of the wider threshold,
    divided by the compactions it avoids per 1,000 steps (one per cycle of n steps),
    prices one avoided disruption. With P = 31, 232k → 600k: 139M tokens, 6.1 disruptions,
    about 23M tokens each, as the seed reports.

    The seed divides a per-productive-step cost by a per-total-step count. Both consistent
    variants come with it: per 1,000 productive steps (one compaction per n − P of them) and
    per 1,000 total steps (a cycle's cost f·(n − P) spread over its n steps)."""
    for threshold in (lower, higher):
        threshold_tokens(threshold, p)
    f_low, f_high = float(cost_per_step(lower, p)), float(cost_per_step(higher, p))
    if not (math.isfinite(f_low) and math.isfinite(f_high)):
        raise CycleInputError("thresholds", "both thresholds must be above the floor S + P·D.")
    n_low, n_high = float(steps_per_cycle(lower, p)), float(steps_per_cycle(higher, p))
    extra = 1000 * (f_high - f_low)
    avoided = 1000 / n_low - 1000 / n_high
    price = extra / avoided if avoided else math.inf
    penalty = p.penalty_steps
    productive = _price(extra, 1000 / (n_low - penalty) - 1000 / (n_high - penalty))
    total = _price(
        1000 * (f_high * (n_high - penalty) / n_high - f_low * (n_low - penalty) / n_low), avoided
    )
    return ExchangeRate(lower, higher, extra, avoided, price, SEED_UNITS, productive, total)


def optimum_interval(
    replicates: list[CycleParams], level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile interval of T* over bootstrap replicates of the parameters."""
    values = [optimum(r) for r in replicates if r.growth_per_step > 0 and r.penalty_steps >= 0]
    if len(values) < 20:
        return None
    tail = (1 - level) / 2 * 100
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))
