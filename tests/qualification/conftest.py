"""Fixtures for qualification tests: planted sweeps as upload files, and loaded qualifications."""

from __future__ import annotations

import csv
import io

import pytest

from qualification import services
from qualification.analysis.simulate import analysis_rows, simulate_sweep
from qualification.analysis.sweep import trials_frame

STRATA = [8000, 16000, 32000, 64000, 128000]
FLAT_THEN_DROP = {
    "retrieval": [0.97, 0.97, 0.97, 0.96, 0.95],
    "code_change": [0.97, 0.97, 0.97, 0.72, 0.50],
}
UPLOAD_COLUMNS = [
    "task_id", "family", "stratum_tokens", "repeat", "retrieval_correct", "task_correct",
    "input_tokens", "output_tokens", "model_calls", "tool_calls", "cost_usd", "latency_ms",
]  # fmt: skip


def to_csv(rows: list[dict], columns=UPLOAD_COLUMNS) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    return buffer.getvalue().encode()


def frame_for(curves, strata=STRATA, **kwargs):
    return trials_frame(analysis_rows(simulate_sweep(curves, strata, **kwargs)))


@pytest.fixture
def make_qualification(workspace, members):
    def make(**overrides):
        options = {
            "workspace": workspace,
            "name": "Sweep A",
            "model": {"name": "model-x", "version": "1"},
            "configuration": {"decoding": {"temperature": 0}, "harness_version": "h1"},
            "workload": {"name": "repo", "version": "1", "families": list(FLAT_THEN_DROP)},
            "threshold": 0.85,
            "consequence": "medium",
            "strata": STRATA,
            "actor": members["editor"],
        }
        options.update(overrides)
        return services.qualification_create(**options)

    return make


@pytest.fixture
def planted_rows():
    return simulate_sweep(FLAT_THEN_DROP, STRATA, tasks=40, repeats=5, seed=3)


@pytest.fixture
def loaded_qualification(make_qualification, planted_rows, members, run_on_commit):
    qualification = make_qualification()
    with run_on_commit():  # the upload queues the analysis when it commits
        upload = services.trial_batch_submit(
            qualification=qualification,
            content=to_csv(planted_rows),
            filename="sweep.csv",
            actor=members["editor"],
            run_now=True,
        )
    assert upload.status == "loaded", upload.job.errors
    qualification.refresh_from_db()
    return qualification


@pytest.fixture
def dropping_successor(loaded_qualification, members):
    """An approved limit with seed 004's stages and three source limits, and a proposed
    successor (by the editor) that drops every stage and two sources and loosens one."""
    from governance.models import Membership

    active = services.operating_limit_propose(
        qualification=loaded_qualification,
        actor=members["editor"],
        name="Agents v1",
        values={"source_limits": {"system": 3000, "history": 6000, "memory": 1000}},
        use_stage_template=True,
    )
    services.operating_limit_approve(
        limit=active,
        reviewer=members["admin"],
        membership=Membership.objects.get(user=members["admin"]),
        confirmed=True,
    )
    successor = services.operating_limit_propose(
        qualification=loaded_qualification,
        actor=members["editor"],
        name="Agents v2",
        values={"source_limits": {"system": 3500}, "rationale": "Fewer knobs."},
    )
    assert successor.supersedes_id == active.pk
    return successor
