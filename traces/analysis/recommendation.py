"""The recommended auto-compact threshold (issue 19). Pure: no Django.

The cycle-model optimum T* (seed 001 §5.1) from measured S, D, SUMM and P, clipped below
the qualified ECL minus the approved reserve and below the approved limit's own maximum
context minus the same reserve (`clipped_by` names the bound that applied), and written as the settings Claude Code and
Codex take (HARNESS_TELEMETRY.md §4, §5). Beside it: tokens per 1,000 productive steps,
1,000·f(T), and the share of steps in the post-compaction degraded region, min(L, n)/n,
for the recommendation and for the setting in use.

Intervals: T* rises with each of S, D, SUMM and P, so the optimum at the parameters'
interval ends (all low, all high) bounds it; the joint bootstrap interval of T* (one T* per
replicate of all four, from the analytics job) is reported too and preferred when present.
The per-step figures come with their range over the 16 combinations of interval ends.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field

from traces.analysis.cycle import (
    CycleInputError,
    CycleParams,
    cost_per_step,
    degraded_share,
    floor_threshold,
    optimum,
    steps_per_cycle,
)

# HARNESS_TELEMETRY.md §4: `/autocompact`, `--autocompact`, `autoCompactWindow` and
# CLAUDE_CODE_AUTO_COMPACT_WINDOW take 100000–1000000, capped at the model's window.
CLAUDE_MIN, CLAUDE_MAX = 100_000, 1_000_000
ROUND_TO = 1_000  # an unclipped optimum is pasted to the nearest 1,000 tokens (f is flat there)
INTERVAL_ENDS = (
    "the optimum at the parameters' interval ends (T* rises with each of S, D, SUMM and P)"
)
BOOTSTRAP = "percentile bootstrap of T* over joint replicates of S, D, SUMM and P"


@dataclass(frozen=True)
class Estimate:
    """A measured parameter: its value, 95% interval (None when too few values) and n."""

    value: float
    ci: tuple[float, float] | None = None
    n: int = 0

    def ends(self) -> tuple[float, float]:
        return self.ci if self.ci else (self.value, self.value)


@dataclass(frozen=True)
class Figures:
    """What a threshold costs under the cycle model: tokens per 1,000 productive steps and
    the share of steps in the degraded region, each with its range over the parameters'
    interval ends. `reason` says why the cost is None (at or below the floor S + P·D)."""

    threshold: int
    tokens_per_1000_steps: float | None
    tokens_range: tuple[float, float] | None
    degraded_share: float
    degraded_range: tuple[float, float]
    steps_per_cycle: float
    ratio_to_optimum: float | None
    reason: str | None = None
    range_reaches_floor: bool = False  # some interval ends put T at or below S + P·D


@dataclass(frozen=True)
class Recommendation:
    optimum: float  # T* on the measured values
    optimum_interval: tuple[float, float] | None
    optimum_interval_method: str
    interval_ends: tuple[float, float]  # T* at all-low and all-high parameters
    ceiling: int | None  # the lower of the bounds below
    clipped: bool
    threshold: int  # the setting to paste
    threshold_interval: tuple[float, float] | None  # the optimum interval, clipped likewise
    floor: float  # S + P·D
    disruption_steps: float
    recommended: Figures
    in_use: Figures | None
    notes: list[str] = field(default_factory=list)
    claude: dict = field(default_factory=dict)
    codex: dict = field(default_factory=dict)
    # {"ecl": ECL − reserve, "max_context": the limit's max context − reserve}, those given
    bounds: dict[str, int] = field(default_factory=dict)
    clipped_by: str | None = None  # "ecl" or "max_context" (the ECL on a tie); None: unclipped

    def as_dict(self) -> dict:
        return asdict(self)


def _corners(s: Estimate, d: Estimate, summ: Estimate, p: Estimate) -> list[CycleParams]:
    return [
        CycleParams(*values)
        for values in itertools.product(s.ends(), d.ends(), summ.ends(), p.ends())
        if values[1] > 0 and values[0] > 0 and values[3] >= 0
    ]


def figures_at(
    threshold: int, params: CycleParams, corners: list[CycleParams], disruption_steps: float
) -> Figures:
    """1,000·f(T) and min(L, n)/n at T, with their ranges over `corners`."""
    value = float(cost_per_step(threshold, params))
    t_star = optimum(params)
    f_star = float(cost_per_step(t_star, params))
    share = float(degraded_share(threshold, params, disruption_steps))
    costs = [float(cost_per_step(threshold, c)) for c in corners]
    costs = [c for c in costs if math.isfinite(c)]
    shares = [
        float(degraded_share(threshold, c, disruption_steps))
        for c in corners
        if threshold > c.post_compaction
    ] or [share]
    finite = math.isfinite(value)
    return Figures(
        threshold=int(threshold),
        tokens_per_1000_steps=1000 * value if finite else None,
        tokens_range=(1000 * min(costs), 1000 * max(costs))
        if finite and len(costs) == len(corners)
        else None,
        degraded_share=share,
        degraded_range=(min(shares), max(shares)),
        steps_per_cycle=float(steps_per_cycle(threshold, params)),
        ratio_to_optimum=value / f_star if finite else None,
        range_reaches_floor=finite and len(costs) < len(corners),
        reason=None
        if finite
        else (
            f"at or below the floor S + P·D = {floor_threshold(params):,.0f}: a cycle "
            "returns no productive work, so the cost per productive step is undefined"
        ),
    )


def claude_settings(threshold: int) -> dict:
    """Claude Code's auto-compact window (HARNESS_TELEMETRY.md §4), or why it cannot take it."""
    if not CLAUDE_MIN <= threshold <= CLAUDE_MAX:
        return {
            "settable": False,
            "reason": f"Claude Code's auto-compact window takes {CLAUDE_MIN:,} to {CLAUDE_MAX:,} "
            f"tokens; {threshold:,} is outside it.",
        }
    return {
        "settable": True,
        "command": f"/autocompact {threshold}",
        "env": f"CLAUDE_CODE_AUTO_COMPACT_WINDOW={threshold}",
        "setting": f'"autoCompactWindow": {threshold}',
        "note": "The window is capped at the model's own; the environment variable wins over "
        "--autocompact, which wins over the saved setting.",
    }


def codex_settings(threshold: int) -> dict:
    """Codex's `model_auto_compact_token_limit` in ~/.codex/config.toml (HARNESS_TELEMETRY §5)."""
    return {
        "settable": True,
        "file": "~/.codex/config.toml",
        "setting": f"model_auto_compact_token_limit = {threshold}",
        "note": "Codex caps a configured limit at 90% of the model's catalog window; the scope "
        "is total unless model_auto_compact_token_limit_scope says otherwise.",
    }


BOUND_TEXT = {
    "ecl": "the qualified ECL",
    "max_context": "the approved limit's maximum context",
}


def ceiling_bounds(
    ecl_tokens: int | None, max_context_tokens: int | None, reserve_tokens: int | None
) -> dict[str, int]:
    """The bounds the threshold stays at or below: {"ecl": ECL − reserve, "max_context":
    the limit's max context − reserve}, for those given (the ECL first, so that it names a
    tie). Raises CycleInputError on a reserve that is missing, negative or leaves no room."""
    given = {"ecl": ecl_tokens, "max_context": max_context_tokens}
    bounds: dict[str, int] = {}
    for name, tokens in given.items():
        if tokens is None:
            continue
        if reserve_tokens is None or reserve_tokens < 0:
            raise CycleInputError("reserve_tokens", "the approved reserve must be 0 or more.")
        bounds[name] = int(tokens) - int(reserve_tokens)
        if bounds[name] <= 0:
            raise CycleInputError(
                "reserve_tokens",
                f"the approved reserve leaves no room below {BOUND_TEXT[name]}.",
            )
    return bounds


def recommend(
    *,
    s: Estimate,
    d: Estimate,
    summ: Estimate,
    p: Estimate,
    ecl_tokens: int | None,
    reserve_tokens: int | None,
    disruption_steps: float,
    in_use: int | None = None,
    bootstrap_interval: tuple[float, float] | None = None,
    max_context_tokens: int | None = None,
) -> Recommendation:
    """The recommended auto-compact threshold: T* on the measured values, rounded to the
    nearest 1,000 tokens, clipped to the lower of ECL − reserve and the approved limit's
    max context − reserve when that is lower (then exactly that bound, named in
    `clipped_by`). Seed 001 (S 65,588, D 1,470, SUMM 4,382, P 28): T* ≈ 220k; a 128k ECL
    with a 12.8k (10%) reserve clips it to 115,200; a limit whose max context is 64k clips
    it to 51,200 whatever the ECL. Raises CycleInputError naming the field."""
    params = CycleParams(s.value, d.value, summ.value, p.value)
    params.validate()
    corners = _corners(s, d, summ, p) or [params]
    t_star = optimum(params)
    low_corner = optimum(CycleParams(*(e.ends()[0] for e in (s, d, summ, p))))
    high_corner = optimum(CycleParams(*(e.ends()[1] for e in (s, d, summ, p))))
    interval = bootstrap_interval or ((low_corner, high_corner) if _any_ci(s, d, summ, p) else None)
    method = BOOTSTRAP if bootstrap_interval else INTERVAL_ENDS
    notes: list[str] = []
    bounds = ceiling_bounds(ecl_tokens, max_context_tokens, reserve_tokens)
    ceiling = min(bounds.values()) if bounds else None
    rounded = int(round(t_star / ROUND_TO) * ROUND_TO)
    clipped = ceiling is not None and rounded > ceiling
    threshold = ceiling if clipped else rounded
    # The bound that sets the ceiling (the ECL on a tie: `bounds` lists it first).
    binding = next((name for name, top in bounds.items() if top == ceiling), None)
    clipped_interval = None
    if interval:
        top = ceiling if ceiling is not None else math.inf
        clipped_interval = (min(interval[0], top), min(interval[1], top))
    floor = floor_threshold(params)
    if threshold <= s.value:
        notes.append(
            f"The threshold {threshold:,} is at or below S ({s.value:,.0f}), where the "
            "session lands after compacting: no cycle fits. Restart from the specification "
            "instead of compacting."
        )
        per_step = Figures(threshold, None, None, 1.0, (1.0, 1.0), 0.0, None, "at or below S")
    else:
        per_step = figures_at(threshold, params, corners, disruption_steps)
        if per_step.tokens_per_1000_steps is None:
            notes.append(
                f"The ceiling {threshold:,} is at or below the floor S + P·D ({floor:,.0f}): "
                "each compaction costs more steps than the cycle returns. Restart from the "
                "specification instead of compacting."
            )
    used = None
    if in_use is not None:
        if in_use <= s.value:
            raise CycleInputError(
                "in_use", f"the setting in use ({in_use:,}) must be above S ({s.value:,.0f})."
            )
        used = figures_at(int(in_use), params, corners, disruption_steps)
        if ceiling is not None and in_use > ceiling:
            notes.append(
                f"The setting in use ({in_use:,}) lets the context pass {BOUND_TEXT[binding]} "
                f"minus the reserve ({ceiling:,})."
            )
    return Recommendation(
        optimum=t_star,
        optimum_interval=interval,
        optimum_interval_method=method,
        interval_ends=(low_corner, high_corner),
        ceiling=ceiling,
        clipped=clipped,
        threshold=threshold,
        threshold_interval=clipped_interval,
        floor=floor,
        disruption_steps=disruption_steps,
        recommended=per_step,
        in_use=used,
        notes=notes,
        claude=claude_settings(threshold),
        codex=codex_settings(threshold),
        bounds=bounds,
        clipped_by=binding if clipped else None,
    )


def _any_ci(*estimates: Estimate) -> bool:
    return any(e.ci for e in estimates)
