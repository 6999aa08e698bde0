"""Writes for instruction visibility (seed 000): a count over more calls than a request
waits for runs as a job; its result is stored on the run."""

from __future__ import annotations

import time

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from orjson import loads

from governance.errors import InputError
from governance.models import Job, Workspace
from governance.services import JobReporter, job_create, job_enqueue
from traces.analytics.instruction_visibility_selectors import (
    Subject,
    instruction_visibility_for,
    subject_for,
)
from traces.analytics.models import InstructionVisibilityRun
from traces.analytics.selectors import AnalyticsFilters

JOB_KIND = "instruction_visibility"
TASK = "analytics.instruction_visibility"


def instruction_visibility_start(
    *, workspace: Workspace, subject: Subject, filters: AnalyticsFilters, user=None
) -> InstructionVisibilityRun:
    """Queue a count of this instruction over the calls the filters select."""
    with transaction.atomic():
        job = job_create(
            workspace=workspace,
            kind=JOB_KIND,
            user=user,
            label=f"Instruction visibility: {subject.text[:120]}",
            progress_unit="calls",
        )
        run = InstructionVisibilityRun.objects.create(
            workspace=workspace,
            instruction="" if subject.ledger else subject.text,
            ledger_instruction=subject.ledger,
            delivery=subject.delivery,
            filters=filters.as_dict(),
            job=job,
            created_by=user if getattr(user, "pk", None) else None,
        )
        job.params = {"run": run.pk}
        job.save(update_fields=["params"])
        job_enqueue(job=job, task=TASK)
    return run


def instruction_visibility_job_run(job: Job, reporter: JobReporter) -> None:
    """The job's work: count, reporting the calls whose text is read, and store."""
    run = InstructionVisibilityRun.objects.filter(workspace=job.workspace, job=job).first()
    if run is None:
        raise InputError("This job's instruction-visibility run was deleted.")
    if run.instruction:
        subject = subject_for(
            workspace=job.workspace, instruction=run.instruction, delivery=run.delivery
        )
    elif run.ledger_instruction_id:
        subject = subject_for(
            workspace=job.workspace,
            ledger_instruction=run.ledger_instruction_id,
            delivery=run.delivery,
        )
    else:
        raise InputError("The ledger instruction of this run was deleted; count it again.")
    started = time.perf_counter()

    def progress(stage: str, done: int, total: int | None) -> None:
        if total != reporter.job.progress_total:
            reporter.set_total(total, "calls")
        reporter.set_done(done)

    result = instruction_visibility_for(
        workspace=job.workspace,
        filters=AnalyticsFilters(**run.filters),
        subject=subject,
        max_calls=None,
        store=True,  # a job: the extracts it makes are kept
        progress=progress,
    )
    run.result = loads(DjangoJSONEncoder().encode(result))
    run.seconds = time.perf_counter() - started
    run.save(update_fields=["result", "seconds"])
    reporter.set_counts(calls=result["calls_read"])
