"""Reads for context files, always scoped to a workspace. A foreign or missing object is a 404."""

from __future__ import annotations

from collections import Counter

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from qualification.contextfiles.analysis import drift
from qualification.contextfiles.analysis.diff import DiffSummary, diff_instructions
from qualification.contextfiles.analysis.evaluation import (
    ArmSpec,
    EvaluationResults,
    TrialRecord,
    analyse_evaluation,
)
from qualification.contextfiles.analysis.parsing import CATEGORY_LABELS, Category
from qualification.contextfiles.formats.listing import Listing
from qualification.contextfiles.models import (
    CommandVerification,
    ContextFile,
    ContextFileRevision,
    DecisionRecord,
    DriftCheck,
    Evaluation,
    EvaluationArm,
    Instruction,
    RepositoryListing,
    Trial,
)


def _get(queryset, pk, what: str):
    try:
        obj = queryset.filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        obj = None
    if obj is None:
        raise Http404(f"No such {what} in this workspace.")
    return obj


def context_files_for(*, workspace) -> QuerySet[ContextFile]:
    return ContextFile.objects.for_workspace(workspace).annotate(
        revision_count=Count("revisions", distinct=True),
        evaluation_count=Count("evaluations", distinct=True),
    )


def context_file_get(*, workspace, pk) -> ContextFile:
    return _get(ContextFile.objects.for_workspace(workspace), pk, "context file")


def latest_revision(*, context_file: ContextFile) -> ContextFileRevision | None:
    return context_file.revisions.order_by("-number").first()


def revision_get(*, context_file: ContextFile, number=None) -> ContextFileRevision:
    revisions = context_file.revisions.all()
    if number in (None, ""):
        revision = revisions.order_by("-number").first()
        if revision is None:
            raise Http404("This file has no revisions.")
        return revision
    try:
        revision = revisions.filter(number=int(number)).first()
    except (TypeError, ValueError):
        revision = None
    if revision is None:
        raise Http404("No such revision of this file.")
    return revision


def revision_by_pk(*, workspace, pk) -> ContextFileRevision:
    return _get(
        ContextFileRevision.objects.for_workspace(workspace).select_related("context_file"),
        pk,
        "revision",
    )


def instructions_for(*, workspace) -> QuerySet[Instruction]:
    return Instruction.objects.for_workspace(workspace).select_related("revision__context_file")


def instruction_get(*, workspace, pk) -> Instruction:
    return _get(instructions_for(workspace=workspace), pk, "instruction")


def ledger_rows(*, revision: ContextFileRevision, today=None) -> list[dict]:
    """The instructions of a revision with their flags and latest drift findings."""
    today = today or timezone.localdate()
    interval = revision.context_file.review_interval_days
    check = latest_drift_check(revision=revision)
    findings = Counter()
    if check is not None:
        findings.update(
            check.findings.exclude(instruction=None)
            .exclude(severity="info")
            .values_list("instruction_id", flat=True)
        )
    rows = []
    for instruction in revision.instructions.order_by("position"):
        rows.append(
            {
                "instruction": instruction,
                "flags": instruction.flags(today, interval),
                "due": instruction.due_date(interval),
                "findings": findings.get(instruction.pk, 0),
            }
        )
    return rows


def ledger_row(*, instruction: Instruction, today=None) -> dict:
    today = today or timezone.localdate()
    interval = instruction.revision.context_file.review_interval_days
    check = latest_drift_check(revision=instruction.revision)
    count = (
        check.findings.filter(instruction=instruction).exclude(severity="info").count()
        if check
        else 0
    )
    return {
        "instruction": instruction,
        "flags": instruction.flags(today, interval),
        "due": instruction.due_date(interval),
        "findings": count,
    }


def flagged_count(*, revision: ContextFileRevision, today=None) -> int:
    today = today or timezone.localdate()
    interval = revision.context_file.review_interval_days
    return sum(
        1 for i in revision.instructions.all() if set(i.flags(today, interval)) - {"never reviewed"}
    )


def revision_diff(
    *, old: ContextFileRevision, new: ContextFileRevision
) -> tuple[DiffSummary, list[Instruction], list[Instruction]]:
    old_rows = list(old.instructions.order_by("position"))
    new_rows = list(new.instructions.order_by("position"))
    summary = diff_instructions([i.text for i in old_rows], [i.text for i in new_rows])
    return summary, old_rows, new_rows


def category_counts(instructions) -> list[dict]:
    """Instructions and tokens of each category present, in the categories' order."""
    counts = []
    for category in Category:
        members = [i for i in instructions if i.category == category.value]
        if members:
            counts.append(
                {"value": category.value, "label": CATEGORY_LABELS[category],
                 "count": len(members), "tokens": sum(i.token_estimate for i in members)}
            )  # fmt: skip
    return counts


def revision_changes(*, revision: ContextFileRevision) -> dict | None:
    """The edits from the previous revision, each with its old and new instruction, for the
    page; None for a first revision."""
    if not revision.previous_id:
        return None
    summary, old_rows, new_rows = revision_diff(old=revision.previous, new=revision)
    return {
        "summary": summary,
        "changes": [
            {
                "kind": c.kind.value,
                "old": old_rows[c.old_index] if c.old_index is not None else None,
                "new": new_rows[c.new_index] if c.new_index is not None else None,
                "segments": c.segments,
                "similarity": c.similarity,
            }
            for c in summary.edits
        ],
    }


def latest_drift_check(*, revision: ContextFileRevision) -> DriftCheck | None:
    return (
        revision.drift_checks.select_related("job", "listing")
        .order_by("-created_at", "-id")
        .first()
    )


def drift_checks_for(*, workspace) -> QuerySet[DriftCheck]:
    return DriftCheck.objects.for_workspace(workspace).select_related("job", "listing", "revision")


def drift_check_get(*, workspace, pk) -> DriftCheck:
    return _get(drift_checks_for(workspace=workspace), pk, "drift check")


def listings_for(*, workspace, repository: str | None = None) -> QuerySet[RepositoryListing]:
    listings = RepositoryListing.objects.for_workspace(workspace).defer("paths", "hashes")
    return listings.filter(repository=repository) if repository else listings


def listing_get(*, workspace, pk) -> RepositoryListing:
    return _get(RepositoryListing.objects.for_workspace(workspace), pk, "repository listing")


def latest_listing(*, workspace, repository: str) -> RepositoryListing | None:
    return (
        RepositoryListing.objects.for_workspace(workspace)
        .filter(repository=repository)
        .order_by("-created_at", "-id")
        .first()
    )


def listing_as_data(record: RepositoryListing) -> Listing:
    return Listing(
        paths=set(filter(None, record.paths.split("\n"))),
        hashes=dict(record.hashes or {}),
        source_format=record.source_format,
        stripped_root=record.stripped_root,
    )


def verifications_for(*, workspace) -> QuerySet[CommandVerification]:
    return CommandVerification.objects.for_workspace(workspace).select_related(
        "verified_by", "context_file"
    )


def latest_verifications(*, context_file: ContextFile) -> dict[str, drift.Verification]:
    latest: dict[str, drift.Verification] = {}
    for record in context_file.verifications.select_related("verified_by").order_by(
        "-verified_at", "-id"
    ):
        if record.command not in latest:
            latest[record.command] = drift.Verification(
                passed=record.passed,
                exit_code=record.exit_code,
                verified_at=record.verified_at,
                verified_by=record.verified_by.get_username() if record.verified_by else "",
            )
    return latest


def command_rows(*, check: DriftCheck | None, context_file: ContextFile) -> list[dict]:
    """Commands the revision names, each with its last verification record."""
    if check is None:
        return []
    records = {}
    for record in context_file.verifications.select_related("verified_by").order_by(
        "-verified_at", "-id"
    ):
        records.setdefault(record.command, record)
    return [
        {"command": c["command"], "line": c["line"], "last": records.get(c["command"])}
        for c in check.commands
    ]


# --- evaluations ----------------------------------------------------------------


def evaluations_for(*, workspace) -> QuerySet[Evaluation]:
    return (
        Evaluation.objects.for_workspace(workspace)
        .select_related("context_file", "revision", "supersedes", "superseded_by", "created_by")
        .annotate(trial_count=Count("trials", distinct=True))
        .order_by("-created_at", "-id")  # Meta.ordering is dropped with the GROUP BY
    )


def evaluation_get(*, workspace, pk) -> Evaluation:
    return _get(
        evaluations_for(workspace=workspace).prefetch_related(
            Prefetch("arms", queryset=EvaluationArm.objects.order_by("position"))
        ),
        pk,
        "evaluation",
    )


def successor_of(evaluation: Evaluation) -> Evaluation | None:
    return Evaluation.objects.filter(supersedes=evaluation).first()


def trials_for(*, evaluation: Evaluation) -> QuerySet[Trial]:
    return evaluation.trials.select_related("arm").order_by("task_id", "repeat", "arm__position")


def trial_values(*, evaluation: Evaluation) -> dict[tuple[str, str, int], dict]:
    """Stored trials keyed by (arm, task_id, repeat), in the shape the upload check compares."""
    fields = (
        "task_id", "repeat", "success", "adherence", "input_tokens", "output_tokens",
        "model_calls", "tool_calls", "cost", "latency_ms", "failure_class",
    )  # fmt: skip
    stored = {}
    for row in evaluation.trials.values("arm__name", *fields):
        arm = row.pop("arm__name")
        stored[(arm, row["task_id"], row["repeat"])] = {"arm": arm, **row}
    return stored


def evaluation_results(*, evaluation: Evaluation) -> EvaluationResults:
    arms = list(evaluation.arms.order_by("position"))
    specs = [ArmSpec(a.name, a.kind, a.label, a.token_estimate) for a in arms]
    names = {a.pk: a.name for a in arms}
    records = [
        TrialRecord(
            task_id=row[0], repeat=row[1], arm=names[row[2]], success=row[3], adherence=row[4],
            input_tokens=row[5], output_tokens=row[6], model_calls=row[7], tool_calls=row[8],
            cost=row[9],
        )
        for row in evaluation.trials.values_list(
            "task_id", "repeat", "arm_id", "success", "adherence", "input_tokens",
            "output_tokens", "model_calls", "tool_calls", "cost",
        )
    ]  # fmt: skip
    return analyse_evaluation(
        records,
        specs,
        delta=evaluation.delta,
        margin=evaluation.margin,
        target_power=evaluation.target_power,
        pilot_discordance=evaluation.pilot_discordance,
    )


def decisions_for(*, evaluation: Evaluation) -> QuerySet[DecisionRecord]:
    return evaluation.decisions.select_related("decided_by")


def file_summaries(*, workspace) -> list[dict]:
    """The file list: latest revision, flags, latest drift counts, latest verdict."""
    rows = []
    for context_file in context_files_for(workspace=workspace):
        revision = latest_revision(context_file=context_file)
        check = latest_drift_check(revision=revision) if revision else None
        problems = 0
        if check is not None and check.counts:
            problems = sum(
                n for per in check.counts.values() for sev, n in per.items() if sev != "info"
            )
        evaluation = (
            context_file.evaluations.exclude(status=Evaluation.Status.SUPERSEDED)
            .order_by("-created_at")
            .first()
        )
        rows.append(
            {
                "file": context_file,
                "revision": revision,
                "flagged": flagged_count(revision=revision) if revision else 0,
                "check": check,
                "problems": problems,
                "evaluation": evaluation,
            }
        )
    return rows


def workspace_counts(*, workspace) -> dict:
    files = ContextFile.objects.for_workspace(workspace).count()
    evaluations = Evaluation.objects.for_workspace(workspace).filter(
        ~Q(status=Evaluation.Status.SUPERSEDED)
    )
    return {"files": files, "evaluations": evaluations.count()}
