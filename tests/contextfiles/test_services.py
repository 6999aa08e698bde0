"""Services against the real database: imports, the ledger, drift jobs, registrations, trials."""

import pytest

from governance.models import AuditEvent, Job, JobStatus
from governance.services import InputError
from qualification.contextfiles import selectors, services
from qualification.contextfiles.models import (
    ContextFileRevision,
    DriftFinding,
    Evaluation,
    Instruction,
    Trial,
)
from tests.contextfiles.conftest import AGENTS_MD, table_tasks, trials_csv

pytestmark = pytest.mark.django_db


def actions(workspace):
    return list(AuditEvent.objects.filter(workspace=workspace).values_list("action", flat=True))


def test_import_parses_stores_and_starts_a_drift_job(imported, workspace):
    revision = imported.revision
    assert imported.created and revision.number == 1 and revision.revision == "c0ffee1"
    assert revision.instruction_count == 15 == revision.instructions.count()
    assert revision.token_estimate == (len(AGENTS_MD) + 3) // 4
    check = selectors.latest_drift_check(revision=revision)
    assert check.job.status == JobStatus.SUCCEEDED and check.finished_at is not None
    assert check.job.progress_done == check.job.progress_total == 6
    assert check.counts["counts"] == {"error": 1}
    assert {"context_file.create", "context_file.import_revision", "drift_check.start"} <= set(
        actions(workspace)
    )


def test_reimporting_the_same_revision_is_a_no_op_and_a_clash_is_refused(
    imported, workspace, members
):
    again = services.context_file_import(
        workspace=workspace,
        repository="acme/shop",
        path="AGENTS.md",
        revision="c0ffee1",
        text=AGENTS_MD,
        actor=members["editor"],
    )
    assert not again.created and again.revision.pk == imported.revision.pk
    with pytest.raises(InputError, match="already imported with different text"):
        services.context_file_import(
            workspace=workspace,
            repository="acme/shop",
            path="AGENTS.md",
            revision="c0ffee1",
            text=AGENTS_MD + "\n- one more\n",
            actor=members["editor"],
        )
    assert ContextFileRevision.objects.count() == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"repository": " "}, "repository:"),
        ({"path": ""}, "path:"),
        ({"text": "   "}, "text: the file is empty"),
        ({"text": "a\x00b"}, "NUL"),
        ({"text": "x" * (600 * 1024)}, "larger than"),
    ],
)
def test_bad_imports_name_the_field(workspace, members, fields, message):
    data = {"repository": "acme/shop", "path": "AGENTS.md", "text": "- rule\n"} | fields
    with pytest.raises(InputError, match=message):
        services.context_file_import(workspace=workspace, actor=members["editor"], **data)
    assert not ContextFileRevision.objects.exists()


def test_revision_defaults_to_the_content_hash(workspace, members):
    result = services.context_file_import(
        workspace=workspace,
        repository="r",
        path="CLAUDE.md",
        text="- rule\n",
        actor=members["editor"],
    )
    assert result.revision.revision.startswith("sha256:") and len(result.revision.revision) == 19


def test_ledger_edits_are_audited_and_carried_to_the_next_revision(
    imported, workspace, members, run_on_commit
):
    first = imported.revision.instructions.get(
        position=2
    )  # "- Run `make test` before every commit."
    services.instruction_update_ledger(
        instruction=first,
        actor=members["editor"],
        owner="platform",
        reason="CI parity",
        affects="red main",
        category="failure_prevention",
        review_due_on="2027-01-01",
    )
    event = AuditEvent.objects.filter(action="instruction.update_ledger").get()
    assert event.data["changes"]["owner"] == ["", "platform"]
    assert event.data["changes"]["review_due_on"] == [None, "2027-01-01"]
    edited = (
        AGENTS_MD.replace("before every commit", "before every push").replace(
            "- Do not commit secrets.\n", ""
        )
        + "- A brand new rule about caching.\n"
    )
    with run_on_commit():
        second = services.context_file_import(
            workspace=workspace,
            repository="acme/shop",
            path="AGENTS.md",
            revision="d00d",
            text=edited,
            actor=members["editor"],
        ).revision
    assert second.number == 2 and second.previous_id == imported.revision.pk
    assert second.diff_counts == {
        "unchanged": 13,
        "moved": 0,
        "changed": 1,
        "added": 1,
        "removed": 1,
    }
    carried = second.instructions.get(text__contains="before every push")
    assert carried.change == "changed" and carried.previous_id == first.pk
    assert (carried.owner, carried.reason, carried.category, carried.category_corrected) == (
        "platform",
        "CI parity",
        "failure_prevention",
        True,
    )
    assert second.instructions.get(text__contains="caching").change == "added"
    # the old revision's ledger is history: it cannot be edited any more
    with pytest.raises(InputError, match="not the latest"):
        services.instruction_update_ledger(instruction=first, actor=members["editor"], owner="x")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"category": "vibes"}, "category:"),
        ({"last_reviewed_on": "yesterday"}, "last_reviewed_on:"),
        ({"last_reviewed_on": "2026-05-01", "review_due_on": "2026-01-01"}, "review_due_on:"),
        ({"owner": "x" * 201}, "owner:"),
        ({"text": "rewrite"}, "not ledger fields"),
    ],
)
def test_bad_ledger_edits_change_nothing(imported, members, changes, message):
    instruction = imported.revision.instructions.get(position=1)
    with pytest.raises(InputError, match=message):
        services.instruction_update_ledger(
            instruction=instruction, actor=members["editor"], **changes
        )
    instruction.refresh_from_db()
    assert instruction.owner == "" and instruction.last_reviewed_on is None


def test_flags(imported, members):
    from datetime import date

    instruction = imported.revision.instructions.get(position=1)
    today = date(2026, 11, 30)
    assert instruction.flags(today) == ["no owner", "no reason", "never reviewed"]
    services.instruction_update_ledger(
        instruction=instruction,
        actor=members["editor"],
        owner="a",
        reason="b",
        last_reviewed_on="2026-01-01",
    )
    instruction.refresh_from_db()
    assert instruction.flags(today) == ["past review date"]  # 2026-01-01 + 180 days < today
    assert instruction.flags(today, interval_days=365) == []


def test_drift_check_with_a_listing_stores_findings_per_revision(
    imported, workspace, members, run_on_commit
):
    listing = services.listing_upload(
        workspace=workspace,
        repository="acme/shop",
        label="c0ffee1",
        data=b"api/handlers.py\nservices/a/x.go\nservices/b/y.go\nservices/c/z.go\ngen/c.py\ndocs/api.md\n",
        actor=members["editor"],
    )
    with run_on_commit():
        check = services.drift_check_start(
            revision=imported.revision, listing=listing, actor=members["editor"]
        )
    check.refresh_from_db()
    assert check.finished_at is not None
    paths = DriftFinding.objects.filter(drift_check=check, check_name="paths")
    assert sorted(f.data["path"] for f in paths) == ["tests/unit", "worker/jobs.py"]
    assert paths.get(data__path="worker/jobs.py").instruction.position == 6
    assert check.findings.filter(check_name="counts", severity="error").count() == 1  # 6 rules vs 5
    assert [c["command"] for c in check.commands] == [
        "make test",
        "ruff check .",
        "pytest tests/unit",
        "make gen",
    ]


def test_a_verified_command_drops_out_of_the_findings(imported, members, run_on_commit):
    context_file = imported.context_file
    services.command_verification_record(
        context_file=context_file,
        command="  make   test ",
        passed=True,
        exit_code=0,
        actor=members["editor"],
    )
    with pytest.raises(InputError, match="contradicts"):
        services.command_verification_record(
            context_file=context_file,
            command="make gen",
            passed=True,
            exit_code=2,
            actor=members["editor"],
        )
    with run_on_commit():
        check = services.drift_check_start(revision=imported.revision, actor=members["editor"])
    commands = {
        f.data["command"]
        for f in DriftFinding.objects.filter(drift_check=check, check_name="commands")
    }
    assert commands == {"ruff check .", "pytest tests/unit", "make gen"}


def test_a_drift_job_for_a_vanished_check_fails_with_a_reason(
    imported, workspace, members, run_on_commit
):
    from qualification.contextfiles.models import DriftCheck

    with run_on_commit():
        check = services.drift_check_start(revision=imported.revision, actor=members["editor"])
    job = check.job
    DriftCheck.objects.filter(pk=check.pk).delete()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.QUEUED, finished_at=None)
    from governance.services import job_run

    job_run(job_id=job.pk, work=services.drift_check_run)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "no longer exists" in job.error


# --- evaluations -----------------------------------------------------------------


def test_registration_defaults_and_arms(imported, members, registration):
    small = services.evaluation_register(
        context_file=imported.context_file,
        actor=members["editor"],
        data=registration
        | {
            "expected_tasks": 40,
            "margin": None,
            "delta": None,
            "ablations": [{"categories": ["build_test"]}],
        },
    )
    assert small.margin == 0.15 and small.delta == 0.05  # fewer than 80 tasks: Δ = 15 points
    assert [a.name for a in small.arms.order_by("position")] == [
        "baseline",
        "full",
        "only-build-test",
    ]
    full = small.arms.get(name="full")
    assert full.token_estimate == imported.revision.token_estimate
    assert 0 < small.arms.get(name="only-build-test").token_estimate < full.token_estimate
    large = services.evaluation_register(
        context_file=imported.context_file,
        actor=members["editor"],
        data=registration | {"margin": None},
    )
    assert large.margin == 0.10 and len(large.fingerprint) == 64


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_version": ""}, "model_version: required"),
        ({"margin": 0.9}, "margin:"),
        ({"delta": "lots"}, "delta:"),
        ({"delta": -0.05}, "delta: must be between 0 and 0.99"),
        ({"decoding": "{temperature"}, "decoding: not JSON"),
        ({"decoding": {}}, "decoding: required"),
        ({"cost_measures": ["vibes"]}, "cost_measures:"),
        ({"ablations": [{"categories": []}]}, "ablations"),
        ({"ablations": [{"name": "full", "categories": ["other"]}]}, "already used"),
        ({"revision": 999999}, "revision:"),
    ],
)
def test_bad_registrations_are_refused(imported, members, registration, change, message):
    with pytest.raises(InputError, match=message):
        services.evaluation_register(
            context_file=imported.context_file, actor=members["editor"], data=registration | change
        )
    assert not Evaluation.objects.exists()


def test_trials_lock_the_registration_and_results_match_the_table(evaluation, members, workspace):
    csv = trials_csv(table_tasks(40, 10, 4, 6), arms=("full", "rules-only"))
    result = services.trials_record(evaluation=evaluation, data=csv, actor=members["editor"])
    assert (result.accepted, result.locked_now) == (180, True)
    evaluation.refresh_from_db()
    assert evaluation.status == "locked" and evaluation.locked_at is not None
    assert {"evaluation.lock", "evaluation.record_trials"} <= set(actions(workspace))
    data = selectors.evaluation_results(evaluation=evaluation).to_dict()
    assert data["n_pairs"] == 60
    assert data["table"] == {"both": 40, "with_only": 10, "without_only": 4, "neither": 6}
    assert data["difference"] == pytest.approx(0.1)
    assert data["verdict"] == "inconclusive"
    assert (
        data["arms"]["full"]["adherence"] == 1.0 and data["arms"]["baseline"]["adherence"] is None
    )
    assert data["arms"]["full"]["cost"]["tokens_per_completed_task"] == pytest.approx(
        60 * 12900 / 50
    )
    assert data["arms"]["full"]["relative_tokens_vs_baseline"] == pytest.approx(2100 / 10800)
    assert data["power_detail"]["psi"] == pytest.approx(14 / 60)
    # the same upload again is recognised, not duplicated
    again = services.trials_record(evaluation=evaluation, data=csv, actor=members["editor"])
    assert (again.accepted, again.already_recorded) == (0, 180)
    assert Trial.objects.count() == 180


def test_a_bad_batch_saves_nothing_and_reports_every_line(evaluation, members):
    csv = (
        "task_id,arm,repeat,success,input_tokens\n"
        "t1,baseline,1,true,10\n"
        "t1,full,1,true,10\n"
        "t1,rules-only,1,true,10\n"
        "t2,full,1,true,10\n"  # unpaired (no baseline, no rules-only)
        "t3,nofile,1,true,10\n"  # unknown arm
        "t1,full,1,false,10\n"  # duplicate
        "t4,baseline,1,perhaps,ten\n"  # wrong types
    )
    with pytest.raises(services.TrialUploadError) as caught:
        services.trials_record(evaluation=evaluation, data=csv, actor=members["editor"])
    lines = {e["line"]: e["error"] for e in caught.value.errors}
    assert set(lines) == {5, 6, 7, 8}
    assert "has no trial in arm(s) baseline, rules-only" in lines[5]
    assert "unknown arm 'nofile'" in lines[6]
    assert "duplicate" in lines[7] and "line 3" in lines[7]
    assert (
        "success must be true or false" in lines[8]
        and "input_tokens must be a whole number" in lines[8]
    )
    assert not Trial.objects.exists()
    evaluation.refresh_from_db()
    assert evaluation.status == "registered"


def test_missing_baseline_arm_is_refused(evaluation, members):
    csv = "task_id,arm,success\nt1,full,true\nt1,rules-only,true\n"
    with pytest.raises(services.TrialUploadError, match="baseline"):
        services.trials_record(evaluation=evaluation, data=csv, actor=members["editor"])


def test_changing_an_open_registration_edits_it_in_place(evaluation, members, workspace):
    result = services.evaluation_change(
        evaluation=evaluation, data={"margin": 0.12}, actor=members["editor"]
    )
    assert result.superseded is None and result.evaluation.pk == evaluation.pk
    assert result.evaluation.margin == 0.12 and result.changed == ["margin"]
    event = AuditEvent.objects.get(action="evaluation.update")
    assert event.data["changes"]["margin"] == [0.10, 0.12]


def test_changing_a_locked_registration_creates_a_superseding_evaluation(
    evaluation, members, workspace
):
    services.trials_record(
        evaluation=evaluation,
        data=trials_csv(table_tasks(5, 1, 1, 1), arms=("full", "rules-only")),
        actor=members["editor"],
    )
    result = services.evaluation_change(
        evaluation=evaluation,
        data={"delta": 0.0, "ablations": []},
        actor=members["editor"],
        reason="δ = 0 was the team's rule all along",
    )
    new, old = result.evaluation, result.superseded
    assert new.pk != old.pk and new.supersedes_id == old.pk
    old.refresh_from_db()
    assert old.status == "superseded" and old.delta == 0.05 and old.trials.count() == 24
    assert new.status == "registered" and new.delta == 0.0 and not new.trials.exists()
    assert [a.name for a in new.arms.all()] == ["baseline", "full"]
    assert new.supersede_reason == "δ = 0 was the team's rule all along"
    assert sorted(result.changed) == ["ablations", "delta"]
    supersede = AuditEvent.objects.get(action="evaluation.supersede")
    assert supersede.data["superseded_by"] == new.pk and supersede.data["changes"]["delta"] == [
        0.05,
        0.0,
    ]
    # a superseded registration can neither change nor take trials
    with pytest.raises(InputError, match="superseded"):
        services.evaluation_change(evaluation=old, data={"margin": 0.2}, actor=members["editor"])
    with pytest.raises(InputError, match="superseded"):
        services.trials_record(
            evaluation=old, data=trials_csv({"t9": (True, True)}), actor=members["editor"]
        )
    # an unchanged resubmission changes nothing at all
    assert (
        services.evaluation_change(
            evaluation=new, data={"delta": 0.0}, actor=members["editor"]
        ).changed
        == []
    )


def test_decision_records_snapshot_the_results(evaluation, members, workspace):
    with pytest.raises(InputError, match="no results"):
        services.decision_record(
            evaluation=evaluation, action="keep", rationale="x", actor=members["reviewer"]
        )
    services.trials_record(
        evaluation=evaluation,
        data=trials_csv(table_tasks(20, 8, 1, 3), arms=("full", "rules-only")),
        actor=members["editor"],
    )
    with pytest.raises(InputError, match="rationale"):
        services.decision_record(
            evaluation=evaluation, action="keep", rationale=" ", actor=members["reviewer"]
        )
    with pytest.raises(InputError, match="kept/removed"):
        services.decision_record(
            evaluation=evaluation, action="revise", rationale="r", actor=members["reviewer"]
        )
    record = services.decision_record(
        evaluation=evaluation,
        action="revise",
        kept="rules",
        removed="architecture",
        rationale="rules carry the gain",
        actor=members["reviewer"],
    )
    assert record.verdict == record.results["verdict"] and record.results["n_pairs"] == 32
    assert AuditEvent.objects.filter(action="evaluation.decide", object_id=str(record.pk)).exists()


def test_instructions_of_other_workspaces_are_not_found(imported, other_workspace):
    from django.http import Http404

    instruction = Instruction.objects.first()
    with pytest.raises(Http404):
        selectors.instruction_get(workspace=other_workspace, pk=instruction.pk)
    with pytest.raises(Http404):
        selectors.context_file_get(workspace=other_workspace, pk=imported.context_file.pk)


def test_a_category_correction_follows_open_arms_and_is_refused_once_results_exist(
    evaluation, members
):
    arm = evaluation.arms.get(name="rules-only")
    before = arm.token_estimate
    moved = evaluation.revision.instructions.exclude(category="failure_prevention").first()
    services.instruction_update_ledger(
        instruction=moved, actor=members["editor"], category="failure_prevention"
    )
    arm.refresh_from_db()
    assert arm.token_estimate > before  # the open registration's arm now holds the instruction
    services.trials_record(
        evaluation=evaluation,
        data=trials_csv(table_tasks(5, 1, 1, 1), arms=("full", "rules-only")),
        actor=members["editor"],
    )
    with pytest.raises(InputError, match=f"evaluation #{evaluation.pk} has results"):
        services.instruction_update_ledger(
            instruction=moved, actor=members["editor"], category="other"
        )
    moved.refresh_from_db()
    assert moved.category == "failure_prevention"
    # Ledger fields other than the category stay editable.
    services.instruction_update_ledger(instruction=moved, actor=members["editor"], owner="ana")
    moved.refresh_from_db()
    assert moved.owner == "ana"
