"""Writes against the real database: sweeps, uploads (all or nothing, line-numbered), the
analysis cache, limits and their review, requalification, and budget checks."""

import pytest
from django.db import connection

from governance.errors import Conflict, Forbidden
from governance.models import AuditEvent, Job, JobStatus, Membership
from governance.services import InputError
from qualification import selectors, services
from qualification.models import (
    AssemblyAudit,
    LimitStatus,
    ModelConfiguration,
    OperatingLimit,
    Qualification,
    QualificationAnalysis,
    Task,
    Trial,
    TrialUpload,
)
from tests.qualification.conftest import STRATA, to_csv

pytestmark = pytest.mark.django_db


def submit(qualification, rows_or_bytes, user, **kwargs):
    content = rows_or_bytes if isinstance(rows_or_bytes, bytes) else to_csv(rows_or_bytes)
    return services.trial_batch_submit(
        qualification=qualification,
        content=content,
        filename=kwargs.pop("filename", "batch.csv"),
        actor=user,
        run_now=True,
        **kwargs,
    )


def job_errors(upload):
    upload.job.refresh_from_db()
    return [(e["line"], e["error"]) for e in upload.job.errors]


def test_configuration_fingerprint_changes_with_any_pinned_field(workspace, members):
    base = {
        "workspace": workspace,
        "model_name": "m",
        "model_version": "1",
        "harness_version": "h1",
    }
    first = services.configuration_get_or_create(**base)
    assert services.configuration_get_or_create(**base) == first
    for change in ({"harness_version": "h2"}, {"decoding": {"temperature": 0.2}},
                   {"prompt_version": "p2"}, {"evaluator_version": "e2"}, {"model_version": "2"}):  # fmt: skip
        assert (
            services.configuration_get_or_create(**(base | change)).fingerprint != first.fingerprint
        )
    assert ModelConfiguration.objects.filter(workspace=workspace).count() == 6


def test_create_records_the_pre_registration_and_defaults_families(make_qualification, workspace):
    qualification = make_qualification(workload={"name": "fresh", "version": "2"})
    assert sorted(qualification.workload.families.values_list("key", flat=True)) == [
        "aggregation", "code_change", "long_code", "retention", "retrieval", "tool_trajectory",
    ]  # fmt: skip
    event = AuditEvent.objects.get(action="qualification.create", object_id=str(qualification.pk))
    assert event.data["threshold"] == 0.85 and event.data["strata"] == STRATA


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"threshold": 1.2}, "threshold: must be strictly between 0 and 1"),
        ({"strata": [8000, "lots"]}, "strata: 'lots' is not a number of tokens"),
        ({"strata": [8000, 8000]}, "strata: each context size may appear only once"),
        ({"analysis_params": {"knee_delta": 2}}, "knee_delta: must be between 0 and 1"),
        ({"model": {"name": "m", "version": ""}}, "model: name and version are both required"),
        ({"configuration": {"temperature": 0}}, "configuration.temperature: unknown field"),
        ({"workload": {"name": "w", "version": "1", "families": ["bad key!"]}}, "must be a slug"),
    ],
)
def test_create_rejects_bad_input_naming_the_field(make_qualification, override, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_qualification(**override)
    assert not Qualification.objects.exists()


def test_requalification_supersedes_and_chains_never_fork(make_qualification):
    first = make_qualification()
    second = make_qualification(
        name="Sweep B", configuration={"harness_version": "h2"}, supersedes=first
    )
    first.refresh_from_db()
    assert first.status == "superseded" and second.supersedes == first
    with pytest.raises(Conflict, match="already superseded"):
        make_qualification(name="Sweep C", supersedes=first)
    with pytest.raises(InputError, match="qualifies model-x, not other"):
        make_qualification(
            name="Sweep D", model={"name": "other", "version": "1"}, supersedes=second
        )


def test_good_upload_saves_everything_and_caches_the_analysis(loaded_qualification):
    assert Trial.objects.filter(qualification=loaded_qualification).count() == 2 * 40 * 5 * 5
    upload = loaded_qualification.uploads.get()
    assert (upload.status, upload.rows_loaded, upload.source) == ("loaded", 2000, "web")
    assert upload.file.read().startswith(b"task_id,family")  # the raw bytes are kept
    assert upload.job.status == JobStatus.SUCCEEDED and upload.job.counts["trials_saved"] == 2000
    assert loaded_qualification.data_version == 1
    analysis = selectors.analysis_current(qualification=loaded_qualification)
    assert analysis is not None and analysis.result["trials"] == 2000
    assert Job.objects.filter(kind="qualification_analysis", status="succeeded").count() == 1
    trial = Trial.objects.filter(qualification=loaded_qualification).order_by("pk").first()
    assert trial.line == 2 and trial.upload == upload


def test_same_bytes_are_not_loaded_twice(loaded_qualification, planted_rows, members):
    again = submit(loaded_qualification, planted_rows, members["editor"])
    assert again == loaded_qualification.uploads.get()
    assert Trial.objects.count() == 2000


def bad_upload_cases(rows):
    first = rows[0]
    return {
        "unknown family": (
            [*rows, {**first, "family": "retreival", "repeat": 9}],
            2002,
            "unknown family 'retreival'; workload repo v1 has code_change, retrieval",
        ),
        "negative tokens": (
            [{**first, "input_tokens": -5}, *rows[1:]],
            2,
            "input_tokens: input_tokens must not be negative, got -5",
        ),
        "duplicate trial rows": (
            [*rows, rows[10]],
            2002,
            "duplicate trial: task retr-001 at 32000 tokens, repeat 0 is already on line 12",
        ),
        "unpaired task": (
            [r for r in rows if not (r["task_id"] == "retr-007" and r["stratum_tokens"] == 64000)],
            None,
            "unpaired task: retr-007 has no trials at 64k",
        ),
        "undeclared stratum": (
            [*rows, {**first, "stratum_tokens": 50000}],
            2002,
            "50000 is not a declared stratum of this qualification",
        ),
        "task in two families": (
            [*rows, {**first, "family": "code_change", "repeat": 7}],
            2002,
            "task retr-001 is in family retrieval on line 2, code_change here",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "unknown family",
        "negative tokens",
        "duplicate trial rows",
        "unpaired task",
        "undeclared stratum",
        "task in two families",
    ],
)
def test_bad_uploads_fail_with_line_numbers_and_save_nothing(
    case, make_qualification, planted_rows, members
):
    qualification = make_qualification()
    rows, line, message = bad_upload_cases(planted_rows)[case]
    upload = submit(qualification, rows, members["editor"])
    assert upload.status == TrialUpload.Status.REJECTED
    assert upload.job.status == JobStatus.FAILED
    assert "nothing was saved" in upload.job.error
    found = job_errors(upload)
    matching = [entry for entry in found if message in entry[1]]
    assert matching, found
    if line is not None:
        assert matching[0][0] == line
    else:
        assert matching[0][0] is not None  # the task's first line in the file
    assert Trial.objects.count() == 0
    qualification.refresh_from_db()
    assert qualification.data_version == 0
    assert upload.file.size > 0  # the rejected batch is kept as evidence
    assert AuditEvent.objects.filter(
        action="trial_upload.reject", object_id=str(upload.pk)
    ).exists()
    upload.job.refresh_from_db()  # progress counts rows saved: none
    assert (upload.job.progress_done, upload.job.progress_total) == (0, len(rows))


def test_upload_progress_counts_rows_saved_batch_by_batch(
    make_qualification, planted_rows, members, monkeypatch
):
    if connection.vendor == "postgresql":
        pytest.skip("test_concurrency reads the progress from a second PostgreSQL connection")
    monkeypatch.setattr(services.trials, "TRIAL_INSERT_BATCH", 500)
    seen = []
    report = services._SavedRowsProgress.report

    def watched(self, done):
        job = Job.objects.filter(pk=self.reporter.job.pk)
        before = job.values_list("progress_done", flat=True).get()
        report(self, done)
        seen.append(
            (before, Trial.objects.count(), job.values_list("progress_done", flat=True).get())
        )

    monkeypatch.setattr(services._SavedRowsProgress, "report", watched)
    upload = submit(make_qualification(), planted_rows, members["editor"], partial=True)
    assert upload.status == "loaded"
    # (job's progress before the batch, rows written, job's progress after): it never runs
    # ahead of the rows written, and showed 0 — not 2,000 — when the insert began.
    assert seen == [(0, 500, 500), (500, 1000, 1000), (1000, 1500, 1500), (1500, 2000, 2000)]
    upload.job.refresh_from_db()
    assert (upload.job.progress_done, upload.job.progress_total, upload.job.progress_unit) == (
        2000,
        2000,
        "rows saved",
    )


def test_a_batch_that_loses_a_race_saves_nothing_and_is_rejected(
    loaded_qualification, planted_rows, members, monkeypatch
):
    # Checked before the first batch committed, it found no stored duplicates (the real race
    # runs on PostgreSQL in test_concurrency); the unique cell constraint catches it on insert.
    check = services._check_against_database
    monkeypatch.setattr(
        services.trials,
        "_check_against_database",
        lambda qualification, parsed, *, partial: {
            **check(qualification, parsed, partial=partial),
            "errors": [],
        },
    )
    fresh = [{**r, "task_id": "retr-new"} for r in planted_rows if r["task_id"] == "retr-001"]
    assert len(fresh) == 25
    monkeypatch.setattr(services.trials, "TRIAL_INSERT_BATCH", 25)  # the fresh task's rows go first
    reported = []
    report = services._SavedRowsProgress.report
    monkeypatch.setattr(
        services._SavedRowsProgress,
        "report",
        lambda self, done: (reported.append(done), report(self, done)),
    )
    late = submit(loaded_qualification, fresh + planted_rows[:100], members["editor"])
    assert reported == [25]  # one batch went in before the clash
    assert late.status == TrialUpload.Status.REJECTED
    assert late.job.status == JobStatus.FAILED
    assert late.job.error == (
        "batch.csv: another batch recorded some of these trials at the same time; nothing was "
        "saved. Upload it again to see which."
    )
    late.job.refresh_from_db()
    assert late.job.progress_done == 0  # the batch written before the clash was rolled back
    assert Trial.objects.count() == 2000 and not Trial.objects.filter(upload=late).exists()
    assert not Task.objects.filter(external_id="retr-new").exists()
    loaded_qualification.refresh_from_db()
    assert loaded_qualification.data_version == 1
    event = AuditEvent.objects.get(action="trial_upload.reject", object_id=str(late.pk))
    assert event.data == {"reason": late.job.error}


def test_duplicates_against_stored_trials_name_the_earlier_upload(
    loaded_qualification, planted_rows, members
):
    rows = [{**planted_rows[0], "cost_usd": 1}]
    upload = submit(loaded_qualification, rows, members["editor"], partial=True)
    first_upload = loaded_qualification.uploads.order_by("pk").first()
    assert job_errors(upload) == [
        (2, "repeat: duplicate trial: task retr-001 at 8000 tokens, repeat 0 is already "
            f"recorded (upload #{first_upload.pk}, line 2)"),
    ]  # fmt: skip


def test_partial_batches_defer_pairing_to_the_analysis(make_qualification, planted_rows, members):
    qualification = make_qualification()
    small = [r for r in planted_rows if r["stratum_tokens"] <= 16000]
    upload = submit(qualification, small, members["editor"], partial=True)
    assert upload.status == "loaded"
    assert not Job.objects.filter(kind="qualification_analysis").exists()  # not for partial batches
    rest = [r for r in planted_rows if r["stratum_tokens"] > 16000]
    rest_upload = submit(qualification, rest, members["editor"])
    assert rest_upload.status == "loaded", job_errors(rest_upload)
    qualification.refresh_from_db()
    assert qualification.data_version == 2
    result = services.qualification_analyse(qualification=qualification).result
    assert result["status"] == "ok" and result["trials"] == 2000


def test_analysis_is_cached_per_version(loaded_qualification):
    first = services.qualification_analyse(qualification=loaded_qualification)
    assert services.qualification_analyse(qualification=loaded_qualification) == first
    Qualification.objects.filter(pk=loaded_qualification.pk).update(data_version=5)
    assert (
        selectors.analysis_current(
            qualification=Qualification.objects.get(pk=loaded_qualification.pk)
        )
        is None
    )
    assert selectors.analysis_latest(qualification=loaded_qualification) == first


def test_pre_registered_fields_are_frozen_once_trials_exist(loaded_qualification, members):
    services.qualification_update(
        qualification=loaded_qualification, actor=members["editor"], name="Renamed"
    )
    with pytest.raises(Conflict, match="threshold were pre-registered"):
        services.qualification_update(
            qualification=loaded_qualification, actor=members["editor"], threshold=0.7
        )


def propose(qualification, user, **values):
    return services.operating_limit_propose(qualification=qualification, actor=user, values=values)


def approve(limit, user):
    membership = Membership.objects.get(workspace=limit.workspace, user=user)
    return services.operating_limit_approve(
        limit=limit, reviewer=user, membership=membership, confirmed=True
    )


def test_proposal_takes_its_numbers_from_the_analysis(loaded_qualification, members):
    result = selectors.analysis_current(qualification=loaded_qualification).result
    limit = propose(loaded_qualification, members["editor"])
    # code_change declines from 64K, so its knee is 32K; × 0.75 = 24k → the tested 16K.
    assert result["proposed_limit_tokens"] == 16000
    assert limit.max_context_tokens == 16000
    assert (limit.reserve_tokens, limit.max_initial_assembly_tokens) == (4000, 12000)
    assert limit.justification["weakest_family"] == "code_change"
    assert limit.justification["threshold"] == 0.85
    assert limit.configuration_fingerprint == loaded_qualification.configuration.fingerprint
    with pytest.raises(InputError, match="only be stricter than the evidence"):
        propose(loaded_qualification, members["editor"], max_context_tokens=32000)
    with pytest.raises(InputError, match="leaves less than the reserve"):
        propose(
            loaded_qualification,
            members["editor"],
            reserve_tokens=6000,
            max_initial_assembly_tokens=12000,
        )


def test_stage_template_is_clamped_to_keep_the_reserve(loaded_qualification, members):
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["editor"], use_stage_template=True
    )
    budgets = {s["key"]: s["max_tokens"] for s in limit.stage_budgets}
    assert budgets == {
        "ticket_parsing": 4000, "plan_generation": 12000, "file_selection": 12000,
        "code_generation": 12000, "reviewer_summary": 12000,
    }  # fmt: skip
    assert (
        "Code generation: 40,000 reduced to 12,000 to keep the reserve"
        in limit.justification["notes"]
    )


def test_no_self_approval(loaded_qualification, members):
    # The admin proposes; the admin (a reviewer too) may not approve it.
    limit = propose(loaded_qualification, members["admin"])
    with pytest.raises(Forbidden, match="another reviewer must approve"):
        approve(limit, members["admin"])
    # A reviewer who edits a proposal becomes a contributor and cannot approve it either.
    services.operating_limit_update(
        limit=limit,
        actor=members["reviewer"],
        reserve_tokens=3000,
        max_initial_assembly_tokens=13000,
    )
    with pytest.raises(Forbidden):
        approve(limit, members["reviewer"])
    # An editor lacks the role.
    with pytest.raises(Forbidden, match="reviewer role"):
        approve(limit, members["editor"])
    limit.refresh_from_db()
    assert limit.status == LimitStatus.PROPOSED


def test_approved_limits_are_immutable_and_only_superseded(loaded_qualification, members):
    limit = approve(propose(loaded_qualification, members["editor"]), members["reviewer"])
    assert limit.status == "approved" and limit.approved_by == members["reviewer"]
    loaded_qualification.refresh_from_db()
    assert loaded_qualification.status == "locked"  # its evidence cannot change any more
    with pytest.raises(Conflict, match="immutable"):
        services.operating_limit_update(limit=limit, actor=members["editor"], reserve_tokens=1)
    with pytest.raises(Conflict, match="already approved"):
        approve(limit, members["admin"])
    with pytest.raises(Conflict, match="Only a proposed limit"):
        services.operating_limit_withdraw(limit=limit, actor=members["editor"])
    successor = propose(
        loaded_qualification,
        members["editor"],
        max_context_tokens=8000,
        reserve_tokens=2000,
        max_initial_assembly_tokens=6000,
    )
    assert successor.supersedes == limit
    approve(successor, members["admin"])
    limit.refresh_from_db()
    assert limit.status == "superseded"
    actions = list(
        AuditEvent.objects.filter(object_type="qualification.operatinglimit").values_list(
            "action", flat=True
        )
    )
    assert {
        "operating_limit.propose",
        "operating_limit.approve",
        "operating_limit.supersede",
    } <= set(actions)


def test_approval_refused_when_trials_changed_after_the_proposal(loaded_qualification, members):
    limit = propose(loaded_qualification, members["editor"])
    Qualification.objects.filter(pk=loaded_qualification.pk).update(data_version=9)
    with pytest.raises(Conflict, match="after this limit was proposed"):
        approve(limit, members["reviewer"])


def test_locked_qualification_takes_no_trials(loaded_qualification, planted_rows, members):
    services.qualification_lock(qualification=loaded_qualification, actor=members["editor"])
    with pytest.raises(Conflict, match="takes no more trials"):
        submit(loaded_qualification, planted_rows[:3], members["editor"], partial=True)


def test_requalification_due_when_the_latest_fingerprint_differs(
    loaded_qualification, make_qualification, members
):
    limit = approve(propose(loaded_qualification, members["editor"]), members["reviewer"])
    assert selectors.requalification_status(limit=limit).due is False
    newer = make_qualification(
        name="Sweep B", configuration={"decoding": {"temperature": 0}, "harness_version": "h2"},
        supersedes=loaded_qualification,
    )  # fmt: skip
    status = selectors.requalification_status(limit=limit)
    assert status.due and status.latest == newer
    with pytest.raises(Conflict, match=r"superseded by #\d+ .*; propose limits from the latest"):
        propose(Qualification.objects.get(pk=loaded_qualification.pk), members["editor"])
    assert status.changes == [("harness_version", "h1", "h2")]
    assert selectors.requalification_due_count(workspace=limit.workspace) == 1


def test_budget_check_is_recorded_as_an_assembly_audit(loaded_qualification, members):
    limit = approve(
        propose(loaded_qualification, members["editor"], source_limits={"retrieved_files": 10000}),
        members["reviewer"],
    )
    audit = services.budget_check_record(
        limit=limit,
        allocation={"system": 3000, "retrieved_files": 12000},
        assembled_prompt="You are …",
        omissions=[
            {"decision": "truncated", "item": "big.py", "tokens": 9000},
            "dropped the lockfile",
        ],
        run_ref="run-1",
        actor=members["editor"],
    )
    assert (audit.verdict, audit.total, audit.limit, audit.reserve_left) == (
        "over",
        15000,
        12000,
        1000,
    )
    assert audit.over_sources == [{"source": "retrieved_files", "tokens": 12000, "limit": 10000}]
    assert audit.action == "compact"
    assert audit.omissions[1] == {"note": "dropped the lockfile", "decision": "omitted"}
    assert audit.prompt_chars == 9 and len(audit.prompt_sha256) == 64
    assert AuditEvent.objects.filter(action="budget_check.record", object_id=str(audit.pk)).exists()


@pytest.mark.parametrize(
    ("allocation", "message"),
    [
        ({}, "allocation: give tokens by source"),
        ({"system": -1}, "allocation.system"),
        ({"system": 1.5}, "allocation.system"),
        ({"": 4}, "source names"),
    ],
)
def test_bad_budget_checks_are_refused(loaded_qualification, members, allocation, message):
    limit = approve(propose(loaded_qualification, members["editor"]), members["reviewer"])
    with pytest.raises(InputError, match=message):
        services.budget_check_record(limit=limit, allocation=allocation, actor=members["editor"])
    assert not AssemblyAudit.objects.exists()


def test_budget_checks_need_an_approved_limit(loaded_qualification, members):
    limit = propose(loaded_qualification, members["editor"])
    with pytest.raises(Conflict, match="proposed; budget checks run against an approved limit"):
        services.budget_check_record(limit=limit, allocation={"system": 1}, actor=members["editor"])


def test_lab_reference_for_model(loaded_qualification, workspace, other_workspace):
    reference = selectors.lab_reference_for_model(workspace=workspace, model_name="model-x")
    assert reference.qualification_id == loaded_qualification.pk
    assert reference.threshold == 0.85 and reference.proposed_limit_tokens == 16000
    code = next(f for f in reference.families if f.family == "code_change")
    assert code.ecl_tokens == 32000 and code.knee_tokens == 32000
    assert code.strata[0].tasks == 40 and code.strata[0].ci[0] < code.strata[0].accuracy
    assert "task-clustered" in reference.interval_note
    assert selectors.lab_reference_for_model(workspace=workspace, model_name="nope") is None
    assert (
        selectors.lab_reference_for_model(workspace=other_workspace, model_name="model-x") is None
    )
    assert OperatingLimit.objects.count() == 0 and QualificationAnalysis.objects.count() == 1
