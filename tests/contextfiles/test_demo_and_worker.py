"""seed_demo's context-file part, and the drift-check job on a real Celery worker."""

import io
import time

import pytest

from governance.models import AuditEvent, Job, JobStatus
from qualification.contextfiles import demo, selectors, services
from qualification.contextfiles.models import (
    CommandVerification,
    ContextFileRevision,
    DecisionRecord,
    DriftFinding,
    Evaluation,
    Instruction,
    Trial,
)
from tests.contextfiles.conftest import AGENTS_MD


@pytest.mark.django_db
def test_demo_adds_a_file_its_ledger_drift_and_an_evaluation_idempotently(
    workspace, members, run_on_commit
):
    users = {
        "admin": members["admin"],
        "editor": members["editor"],
        "reviewer": members["reviewer"],
        "viewer": members["viewer"],
    }
    with run_on_commit():
        demo.seed(workspace=workspace, users=users, stdout=io.StringIO())
    counts = {
        model.__name__: model.objects.count()
        for model in (
            ContextFileRevision,
            Instruction,
            Evaluation,
            Trial,
            DecisionRecord,
            CommandVerification,
        )
    }
    assert counts == {
        "ContextFileRevision": 3,
        "Instruction": 17 + 16 + 12,
        "Evaluation": 1,
        "Trial": 480,
        "DecisionRecord": 1,
        "CommandVerification": 2,
    }
    latest = ContextFileRevision.objects.get(number=3)
    rows = selectors.ledger_rows(revision=latest)
    flags = [set(r["flags"]) for r in rows]
    assert any("no owner" in f for f in flags) and any("past review date" in f for f in flags)
    assert any(f == set() for f in flags)
    check = selectors.latest_drift_check(revision=latest)
    kinds = set(DriftFinding.objects.filter(drift_check=check).values_list("check_name", flat=True))
    assert {"counts", "paths", "commands", "generated", "contradictions"} <= kinds
    evaluation = Evaluation.objects.get()
    assert evaluation.status == "locked"
    results = selectors.evaluation_results(evaluation=evaluation).to_dict()
    assert results["verdict"] == "inconclusive"
    assert {a["comparison"]["verdict"] for a in results["arms"].values() if a["comparison"]} == {
        "inconclusive",
        "helps",
        "equivalent",
    }
    events = AuditEvent.objects.count()
    with run_on_commit():
        demo.seed(workspace=workspace, users=users, stdout=io.StringIO())
    assert counts == {
        model.__name__: model.objects.count()
        for model in (
            ContextFileRevision,
            Instruction,
            Evaluation,
            Trial,
            DecisionRecord,
            CommandVerification,
        )
    }
    assert AuditEvent.objects.count() == events


@pytest.mark.celery_worker
@pytest.mark.postgres
def test_drift_checks_run_on_a_real_worker(celery_worker, workspace, members):
    result = services.context_file_import(
        workspace=workspace,
        repository="acme/shop",
        path="AGENTS.md",
        revision="c0ffee1",
        text=AGENTS_MD,
        actor=members["editor"],
    )
    job = result.drift_check.job
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.is_finished:
            break
        time.sleep(0.2)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.attempts == 1 and job.progress_done == 6
    check = selectors.latest_drift_check(revision=result.revision)
    assert check.findings.filter(check_name="counts", severity="error").count() == 1
    assert Job.objects.filter(kind="context_file_drift_check").count() == 1
