"""Power and sample size for paired with/without comparisons (METHODS.md §4). No Django.

ψ is the discordant fraction p₁₀ + p₀₁ and δ the true difference p₁₀ − p₀₁.

* `mcnemar_sample_size` / `mcnemar_power` — Connor (1987), McNemar superiority.
* `equivalence_sample_size` / `equivalence_power` — paired TOST when the true difference is 0.
* `independent_sample_size` — the unpaired route (statsmodels); an upper bound only.
* `simulate_verdicts` — the actual pre-registered decision rule on multinomial draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from qualification.analysis.paired import Verdict, _newcombe_arrays


def _check_psi(psi: float) -> None:
    if not 0 < psi <= 1:
        raise ValueError(f"the discordant fraction ψ must be in (0, 1], got {psi!r}")


def mcnemar_sample_size(p10: float, p01: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Pairs needed to detect δ = p10 − p01 with a two-sided McNemar test (Connor 1987)."""
    psi, delta = p10 + p01, p10 - p01
    _check_psi(psi)
    if delta == 0:
        raise ValueError("p10 and p01 are equal: there is no difference to detect")
    z_a = norm.ppf(1 - alpha / 2)
    z_b = norm.ppf(power)
    n = (z_a * math.sqrt(psi) + z_b * math.sqrt(psi - delta**2)) ** 2 / delta**2
    return math.ceil(n - 1e-9)


def mcnemar_power(n: int, p10: float, p01: float, *, alpha: float = 0.05) -> float:
    """Connor's formula solved for power at n pairs."""
    psi, delta = p10 + p01, abs(p10 - p01)
    _check_psi(psi)
    if n <= 0 or delta == 0:
        return alpha if delta == 0 else 0.0
    z_a = norm.ppf(1 - alpha / 2)
    z_b = (delta * math.sqrt(n) - z_a * math.sqrt(psi)) / math.sqrt(psi - delta**2)
    return float(norm.cdf(z_b))


def equivalence_sample_size(
    psi: float, margin: float, *, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Pairs needed to show |D| < Δ by TOST when the true difference is 0."""
    _check_psi(psi)
    if margin <= 0:
        raise ValueError("the equivalence margin must be positive")
    z = norm.ppf(1 - alpha) + norm.ppf(1 - (1 - power) / 2)
    return math.ceil(z**2 * psi / margin**2 - 1e-9)


def equivalence_power(n: int, psi: float, margin: float, *, alpha: float = 0.05) -> float:
    """Approximate TOST power at n pairs when the true difference is 0."""
    _check_psi(psi)
    if n <= 0:
        return 0.0
    z_half_beta = margin * math.sqrt(n / psi) - norm.ppf(1 - alpha)
    return float(max(0.0, 2 * norm.cdf(z_half_beta) - 1))


def independent_sample_size(
    p1: float, p2: float, *, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Per-arm n for two independent proportions (Cohen's h). Pairing needs far fewer."""
    effect = proportion_effectsize(p1, p2)
    n = NormalIndPower().solve_power(effect_size=effect, alpha=alpha, power=power)
    return math.ceil(n)


@dataclass(frozen=True)
class SimulatedPower:
    n: int
    reps: int
    cell_probabilities: tuple[float, float, float, float]
    shares: dict[str, float]

    def share(self, verdict: Verdict | str) -> float:
        return self.shares.get(str(verdict), 0.0)


def simulate_verdicts(
    n: int,
    cell_probabilities: Sequence[float],
    *,
    delta: float,
    margin: float,
    reps: int = 2000,
    seed: int = 0,
) -> SimulatedPower:
    """Share of each verdict when the pre-registered rule is applied to simulated tables.

    `cell_probabilities` = (p_both, p_with_only, p_without_only, p_neither); each replicate
    draws `rng.multinomial(n, …)` and decides with Newcombe's 95% and 90% intervals.
    """
    probs = np.asarray(cell_probabilities, dtype=float)
    if probs.shape != (4,) or np.any(probs < 0) or not math.isclose(probs.sum(), 1, abs_tol=1e-9):
        raise ValueError("give four non-negative cell probabilities that sum to 1")
    if n <= 0:
        raise ValueError("n must be positive")
    rng = np.random.default_rng(seed)
    tables = rng.multinomial(n, probs / probs.sum(), size=reps)
    a, b, c, d = tables.T
    lo95, hi95 = _newcombe_arrays(a, b, c, d, alpha=0.05)
    lo90, hi90 = _newcombe_arrays(a, b, c, d, alpha=0.10)
    verdicts = np.full(reps, Verdict.INCONCLUSIVE.value, dtype=object)
    hurts = hi95 < 0
    equivalent = (lo90 > -margin) & (hi90 < margin)
    helps = lo95 > delta
    verdicts[hurts] = Verdict.HURTS.value
    verdicts[equivalent] = Verdict.EQUIVALENT.value
    verdicts[helps] = Verdict.HELPS.value
    values, counts = np.unique(verdicts.astype(str), return_counts=True)
    shares = {str(v): float(k) / reps for v, k in zip(values, counts, strict=True)}
    return SimulatedPower(
        n=n, reps=reps, cell_probabilities=tuple(float(p) for p in probs), shares=shares
    )


@dataclass(frozen=True)
class PowerStatement:
    """What the evaluation could resolve, with the assumptions it rests on."""

    n_pairs: int
    psi: float | None
    psi_source: str
    effect: float
    margin: float
    alpha: float
    target_power: float
    superiority_power: float | None
    superiority_needed: int | None
    equivalence_power: float | None
    equivalence_needed: int | None
    note: str = ""


def power_statement(
    *,
    n_pairs: int,
    observed_psi: float,
    margin: float,
    delta: float,
    registered_psi: float | None = None,
    alpha: float = 0.05,
    target_power: float = 0.8,
) -> PowerStatement:
    """Achieved power and the pairs that would have been needed, for both questions.

    The effect to detect is δ when δ > 0, else Δ. ψ is the pre-registered pilot value when
    there is one, else the observed discordance; ψ is raised to at least |effect| because
    p₁₀ + p₀₁ can never be smaller than p₁₀ − p₀₁.
    """
    effect = delta if delta > 0 else margin
    if registered_psi is not None:
        psi, source = registered_psi, "pre-registered pilot estimate"
    else:
        psi, source = observed_psi, "observed discordance"
    if psi is None or not math.isfinite(psi) or psi <= 0:
        return PowerStatement(
            n_pairs=n_pairs, psi=None, psi_source=source, effect=effect, margin=margin,
            alpha=alpha, target_power=target_power, superiority_power=None,
            superiority_needed=None, equivalence_power=None, equivalence_needed=None,
            note="No discordant pairs, so ψ cannot be estimated; register a pilot ψ to "
            "state power.",
        )  # fmt: skip
    psi_for_effect = min(1.0, max(psi, effect))
    p10, p01 = (psi_for_effect + effect) / 2, (psi_for_effect - effect) / 2
    return PowerStatement(
        n_pairs=n_pairs,
        psi=psi,
        psi_source=source,
        effect=effect,
        margin=margin,
        alpha=alpha,
        target_power=target_power,
        superiority_power=mcnemar_power(n_pairs, p10, p01, alpha=alpha),
        superiority_needed=mcnemar_sample_size(p10, p01, alpha=alpha, power=target_power),
        equivalence_power=equivalence_power(n_pairs, psi, margin, alpha=alpha),
        equivalence_needed=equivalence_sample_size(psi, margin, alpha=alpha, power=target_power),
    )
