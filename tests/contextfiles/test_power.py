"""Power formulas and the simulation against METHODS.md §4. No database."""

import pytest

from qualification.analysis.paired import Verdict
from qualification.analysis.power import (
    equivalence_power,
    equivalence_sample_size,
    independent_sample_size,
    mcnemar_power,
    mcnemar_sample_size,
    power_statement,
    simulate_verdicts,
)


@pytest.mark.parametrize(
    ("p10", "p01", "n"), [(0.15, 0.05, 155), (0.20, 0.05, 85), (0.10, 0.02, 145)]
)
def test_connor_sample_sizes(p10, p01, n):
    assert mcnemar_sample_size(p10, p01) == n
    assert mcnemar_power(n, p10, p01) >= 0.80 > mcnemar_power(n - 1, p10, p01)


@pytest.mark.parametrize(
    ("psi", "margin", "n"),
    [
        (0.1, 0.10, 86),
        (0.1, 0.15, 39),
        (0.2, 0.10, 172),
        (0.2, 0.15, 77),
        (0.3, 0.10, 257),
        (0.3, 0.15, 115),
    ],
)
def test_equivalence_sample_size_table(psi, margin, n):
    assert equivalence_sample_size(psi, margin) == n
    assert equivalence_power(n, psi, margin) >= 0.80 > equivalence_power(n - 1, psi, margin)


def test_independent_samples_route_is_the_published_upper_bound():
    assert independent_sample_size(0.8, 0.7) == 292


def test_power_grows_with_n_and_is_zero_without_pairs():
    assert (
        mcnemar_power(50, 0.15, 0.05)
        < mcnemar_power(150, 0.15, 0.05)
        < mcnemar_power(400, 0.15, 0.05)
    )
    assert equivalence_power(0, 0.2, 0.1) == 0.0


def test_simulation_reproduces_the_published_tost_behaviour():
    # 60 tasks, ψ = .2, Δ = .10: power at a true difference of 0 ≈ .105; type-I error at the margin ≈ .031
    at_zero = simulate_verdicts(
        60, [0.45, 0.10, 0.10, 0.35], delta=0.05, margin=0.10, reps=20000, seed=1
    )
    assert at_zero.share(Verdict.EQUIVALENT) == pytest.approx(0.105, abs=0.02)
    at_margin = simulate_verdicts(
        60, [0.45, 0.15, 0.05, 0.35], delta=0.05, margin=0.10, reps=20000, seed=2
    )
    assert at_margin.share(Verdict.EQUIVALENT) == pytest.approx(0.031, abs=0.012)
    assert sum(at_zero.shares.values()) == pytest.approx(1.0)


def test_simulation_validates_its_input():
    with pytest.raises(ValueError, match="sum to 1"):
        simulate_verdicts(10, [0.5, 0.5, 0.5, 0.0], delta=0.05, margin=0.1)
    with pytest.raises(ValueError):
        simulate_verdicts(0, [0.25] * 4, delta=0.05, margin=0.1)


def test_power_statement_prefers_the_registered_pilot_and_explains_missing_psi():
    registered = power_statement(
        n_pairs=60, observed_psi=0.05, margin=0.10, delta=0.05, registered_psi=0.2
    )
    assert registered.psi == 0.2 and registered.psi_source.startswith("pre-registered")
    assert registered.equivalence_needed == 172
    observed = power_statement(n_pairs=60, observed_psi=0.0, margin=0.10, delta=0.05)
    assert observed.superiority_power is None and "cannot be estimated" in observed.note


def test_power_statement_uses_delta_then_margin_as_the_effect():
    with_delta = power_statement(n_pairs=100, observed_psi=0.2, margin=0.10, delta=0.05)
    assert with_delta.effect == 0.05
    without_delta = power_statement(n_pairs=100, observed_psi=0.2, margin=0.10, delta=0.0)
    assert without_delta.effect == 0.10
    # Connor with p10=.15, p01=.05 → 155 pairs for 80%
    assert without_delta.superiority_needed == 155
