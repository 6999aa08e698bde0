"""Shared set-up for the compaction recommendation tests: an approved limit whose weakest
family's qualified ECL is 128k, held with a 12.8k (10%) reserve, and a stored analytics
result carrying seed 001's measured cycle parameters.

A low-consequence qualification proposes the ECL itself (no margin), so `limit_128k` has
a 128k maximum context: both bounds are 115.2k. `limit_64k` is the usual medium-consequence
limit (×0.75 of 128k, down to the 64k stratum), whose maximum context binds first."""

from __future__ import annotations

import pytest

from governance.models import Membership
from qualification import services as qualification_services
from qualification.analysis.simulate import simulate_sweep
from tests.qualification.conftest import to_csv
from traces.analysis.compactions import CycleParameters, Parameter
from traces.analytics.selectors import AnalyticsFilters
from traces.analytics.services import analytics_store

MODEL = "claude-sonnet-4-5"
STRATA = [16_000, 32_000, 64_000, 128_000, 256_000]
# Both families hold at 0.97 up to 128k; code_change falls to 0.5 at 256k: ECL 128k.
CURVES = {
    "retrieval": [0.97, 0.97, 0.97, 0.97, 0.96],
    "code_change": [0.97, 0.97, 0.97, 0.97, 0.50],
}
SEED = {"S": 65_588, "D": 1_470, "SUMM": 4_382, "P": 28}
SEED_CI = {"S": (61_000, 70_100), "D": (1_402, 1_533), "SUMM": (4_100, 4_690), "P": (24, 33)}


def approve_limit(
    workspace, members, run_on_commit, *, model=MODEL, reserve=12_800, max_context=128_000,
    consequence="low",
):  # fmt: skip
    qualification = qualification_services.qualification_create(
        workspace=workspace,
        name="Sweep 128k",
        model={"name": model, "version": "1"},
        configuration={"decoding": {"temperature": 0}, "harness_version": "h1"},
        workload={"name": "repo", "version": "1", "families": list(CURVES)},
        threshold=0.85,
        consequence=consequence,
        strata=STRATA,
        actor=members["editor"],
    )
    with run_on_commit():
        upload = qualification_services.trial_batch_submit(
            qualification=qualification,
            content=to_csv(simulate_sweep(CURVES, STRATA, tasks=40, repeats=5, seed=3)),
            filename="sweep.csv",
            actor=members["editor"],
            run_now=True,
        )
    assert upload.status == "loaded", upload.job.errors
    limit = qualification_services.operating_limit_propose(
        qualification=qualification,
        actor=members["editor"],
        name="Sonnet 4.5 agents",
        values={
            "max_context_tokens": max_context,
            "reserve_tokens": reserve,
            "max_initial_assembly_tokens": max_context - reserve,
        },
    )
    return qualification_services.operating_limit_approve(
        limit=limit,
        reviewer=members["admin"],
        membership=Membership.objects.get(user=members["admin"], workspace=workspace),
        confirmed=True,
    )


def seed_parameters(values=None, cis=None, n=873, optimum_ci=None) -> dict:
    """The analytics section `cycle_parameters` as the job stores it, with seed 001's values."""
    values, cis = values or SEED, cis if cis is not None else SEED_CI

    def parameter(name, unit):
        return Parameter(name, float(values[name]), cis.get(name), n, unit, "test values")

    measured = CycleParameters(
        post_compaction=parameter("S", "tokens"),
        growth_per_step=parameter("D", "tokens/step"),
        summary=parameter("SUMM", "tokens"),
        penalty_steps=parameter("P", "steps"),
        compactions=n,
        optimum_threshold=None,
        optimum_ci=optimum_ci,
        penalty_optimum_ci=None,
        bootstrap=1000,
    )
    return measured.as_dict()


def store_parameters(workspace, *, model=MODEL, task_type="building", section=None, **kwargs):
    filters = AnalyticsFilters(model=model, task_type=task_type)
    workspace.refresh_from_db()
    return analytics_store(
        workspace=workspace,
        filters=filters,
        data_version=workspace.data_version,
        result={"cycle_parameters": section or seed_parameters(**kwargs), "failures": {}},
        seconds=0.1,
    )


@pytest.fixture
def limit_128k(workspace, members, run_on_commit):
    return approve_limit(workspace, members, run_on_commit)


@pytest.fixture
def limit_64k(workspace, members, run_on_commit):
    return approve_limit(
        workspace, members, run_on_commit, max_context=64_000, consequence="medium"
    )
