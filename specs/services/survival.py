"""Writes for the survival audit: compare a compaction summary with the governing spec's
settled items, and people's corrections of a verdict (which a re-run never overwrites)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from governance.errors import InputError
from governance.models import Job
from governance.services import JobReporter, audit_record, job_create, job_enqueue
from specs.analysis import survival
from specs.models import ItemStatus, SurvivalAudit, SurvivalVerdict
from specs.selectors.survival import authoritative_version_of, spec_for_session
from traces.models import Compaction

COMPUTED_FIELDS = ["position", "key", "kept", "score", "reason", "missing"]


def survival_audit_run(*, compaction: Compaction, actor=None) -> SurvivalAudit | None:
    """Audit one compaction's summary against the authoritative version of the spec governing
    its session. None when there is no summary, no such spec or no settled item. Idempotent:
    a re-run rewrites the computed verdicts and keeps every correction."""
    summary = compaction.compact_summary or ""
    if not summary.strip():
        return None
    spec = spec_for_session(session=compaction.session)
    version = authoritative_version_of(spec=spec) if spec is not None else None
    if version is None:
        return None
    items = list(version.items.filter(status=ItemStatus.SETTLED).order_by("position"))
    if not items:
        return None
    verdicts = survival.audit([survival.AuditItem(i.key, i.text) for i in items], summary)
    with transaction.atomic():
        audit, _ = SurvivalAudit.objects.get_or_create(
            workspace_id=compaction.workspace_id,
            compaction=compaction,
            spec_version=version,
            defaults={
                "method": survival.METHOD,
                "threshold": survival.THRESHOLD,
                "summary_sha256": "",
                "ran_at": timezone.now(),
            },
        )
        audit = SurvivalAudit.objects.select_for_update().get(pk=audit.pk)
        audit.method = survival.METHOD
        audit.threshold = survival.THRESHOLD
        audit.summary_sha256 = hashlib.sha256(summary.encode()).hexdigest()
        audit.ran_at = timezone.now()
        audit.save(update_fields=["method", "threshold", "summary_sha256", "ran_at"])
        existing = {v.item_id: v for v in audit.verdicts.all()}
        fresh, changed = [], []
        for position, (item, verdict) in enumerate(zip(items, verdicts, strict=True)):
            row = existing.get(item.pk) or SurvivalVerdict(
                workspace_id=compaction.workspace_id, audit=audit, item=item
            )
            row.position = position
            row.key = item.key
            row.kept = verdict.kept
            row.score = round(verdict.score, 4)
            row.reason = verdict.reason[:500]
            row.missing = list(verdict.missing)
            (changed if row.pk else fresh).append(row)
        SurvivalVerdict.objects.bulk_create(fresh)
        SurvivalVerdict.objects.bulk_update(changed, COMPUTED_FIELDS)
        kept = sum(v.kept for v in verdicts)
        audit_record(
            workspace=compaction.workspace,
            actor=actor,
            action="survival_audit.run",
            obj=audit,
            data={
                "compaction": compaction.pk,
                "spec": spec.slug,
                "spec_version": version.number,
                "kept": kept,
                "lost": len(verdicts) - kept,
                "corrections_kept": sum(1 for v in existing.values() if v.is_corrected),
            },
        )
    return audit


SURVIVAL_JOB_KIND = "survival_audit"


def survival_after_summary(*, compaction: Compaction, actor=None) -> Job | None:
    """The hook's call once a summary is stored: queue the audit as a job that runs after the
    hook's transaction commits, so the audit never lengthens the hook's request (with no
    broker, the in-process runner runs it after the commit). None when no specification
    governs the session: there is nothing to audit."""
    if spec_for_session(session=compaction.session) is None:
        return None
    job = job_create(
        workspace=compaction.workspace,
        kind=SURVIVAL_JOB_KIND,
        user=actor,
        label=f"Survival audit of compaction {compaction.pk}",
        params={"compaction": compaction.pk},
        progress_total=1,
    )
    job_enqueue(job=job, task="specs.survival_audit")
    return job


def survival_audit_job_run(job: Job, reporter: JobReporter) -> None:
    """The work of a survival-audit job: audit its compaction (idempotent: a second attempt
    rewrites the computed verdicts and keeps every correction)."""
    compaction = (
        Compaction.objects.filter(workspace=job.workspace, pk=job.params.get("compaction"))
        .select_related("session", "workspace")
        .first()
    )
    if compaction is None:
        raise InputError("the compaction was deleted before its summary could be audited")
    audit = survival_audit_run(compaction=compaction, actor=job.created_by)
    reporter.advance()
    if audit is None:
        reporter.set_counts(audited=0)
        return
    kept = audit.verdicts.filter(kept=True).count()
    reporter.set_counts(audited=1, kept=kept, lost=audit.verdicts.count() - kept)


@dataclass(frozen=True)
class SurvivalRunResult:
    compactions: int
    audited: int
    skipped: int


def survival_audits_run(*, workspace, actor, session=None) -> SurvivalRunResult:
    """Run (or re-run) the audit for every compaction with a summary, in a workspace or in one
    of its sessions."""
    compactions = (
        Compaction.objects.filter(workspace=workspace)
        .exclude(compact_summary="")
        .select_related("session", "workspace")
        .order_by("session_id", "timestamp", "id")
    )
    if session is not None:
        compactions = compactions.filter(session=session)
    audited = total = 0
    for compaction in compactions:
        total += 1
        audited += survival_audit_run(compaction=compaction, actor=actor) is not None
    return SurvivalRunResult(total, audited, total - audited)


VERDICT_CHOICES = {"kept": True, "lost": False, "computed": None}


def survival_verdict_correct(
    *, verdict: SurvivalVerdict, actor, verdict_value: str, note: str = ""
) -> SurvivalVerdict:
    """A person's verdict on one item ('kept' or 'lost'), or 'computed' to withdraw it."""
    if verdict_value not in VERDICT_CHOICES:
        raise InputError.for_fields({"verdict": "Choose kept, lost or computed."})
    note = " ".join((note or "").split())
    if len(note) > 500:
        raise InputError.for_fields({"note": "At most 500 characters."})
    with transaction.atomic():
        row = SurvivalVerdict.objects.select_for_update().get(pk=verdict.pk)
        before = row.corrected_kept
        row.corrected_kept = VERDICT_CHOICES[verdict_value]
        if row.corrected_kept is None:
            row.corrected_by, row.corrected_at, row.correction_note = None, None, ""
        else:
            row.corrected_by, row.corrected_at, row.correction_note = actor, timezone.now(), note
        row.save(
            update_fields=["corrected_kept", "corrected_by", "corrected_at", "correction_note"]
        )
        audit_record(
            workspace=row.workspace,
            actor=actor,
            action="survival_verdict.correct",
            obj=row,
            data={
                "key": row.key,
                "computed": "kept" if row.kept else "lost",
                "from": None if before is None else ("kept" if before else "lost"),
                "to": verdict_value,
                "note": note,
            },
        )
    return row
