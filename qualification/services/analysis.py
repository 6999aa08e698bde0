"""The analysis cache: computing a qualification's analysis, requested as a job."""

from __future__ import annotations

import time

import orjson
from django.db import transaction

from governance.errors import Conflict
from governance.models import Job
from governance.services import InputError, JobReporter, job_create, job_enqueue
from qualification import selectors
from qualification.analysis.sweep import analyse_sweep
from qualification.models import Qualification, QualificationAnalysis

ANALYSIS_JOB = "qualification_analysis"


def qualification_analyse(
    *, qualification: Qualification, job: Job | None = None, reporter: JobReporter | None = None
) -> QualificationAnalysis:
    """The analysis of the qualification's current version, computed once and cached."""
    qualification.refresh_from_db()
    params = selectors.analysis_params_for(qualification)
    fingerprint = selectors.params_fingerprint(params)
    cached = selectors.analysis_current(qualification=qualification)
    if cached is not None:
        return cached
    started = time.perf_counter()
    for _ in range(5):
        # The trials read must belong to the version the cache row is labelled with.
        version = Qualification.objects.values_list("data_version", flat=True).get(
            pk=qualification.pk
        )
        frame = selectors.trial_frame(qualification=qualification)
        if Qualification.objects.filter(pk=qualification.pk, data_version=version).exists():
            break
    if reporter is not None:
        reporter.set_total(frame["family"].nunique() + 1, unit="families")

    def progress(done, total, label):
        if reporter is not None:
            reporter.set_done(done)

    result = analyse_sweep(frame, params, progress=progress).as_dict()
    duration = int((time.perf_counter() - started) * 1000)
    with transaction.atomic():
        analysis, _ = QualificationAnalysis.objects.get_or_create(
            workspace=qualification.workspace,
            qualification=qualification,
            data_version=version,
            params_fingerprint=fingerprint,
            defaults={
                "params": params.as_dict(),
                "result": orjson.loads(orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY)),
                "duration_ms": duration,
                "job": job,
            },
        )
        QualificationAnalysis.objects.filter(qualification=qualification).exclude(
            pk=analysis.pk
        ).filter(data_version__lt=version).delete()
    if reporter is not None:
        reporter.set_counts(
            trials=result["trials"], status=result["status"], seconds=round(duration / 1000, 2)
        )
    return analysis


def analysis_request(*, qualification: Qualification, actor=None) -> Job | None:
    """Queue the analysis of the current version unless it is cached or already queued."""
    if selectors.analysis_current(qualification=qualification) is not None:
        return None
    pending = selectors.analysis_job_pending(qualification=qualification)
    if pending is not None:
        return pending
    job = job_create(
        workspace=qualification.workspace,
        kind=ANALYSIS_JOB,
        user=actor,
        label=f"Analyse {qualification.name} (version {qualification.data_version})"[:300],
        params={"qualification_id": qualification.pk, "data_version": qualification.data_version},
    )
    job_enqueue(job=job, task="qualification.analyse")
    return job


class AnalysisPending(Conflict):
    """The analysis of the current trials is not cached yet; `job` is computing it."""

    code = "analysis_pending"

    def __init__(self, *, qualification: Qualification, job: Job):
        self.qualification, self.job = qualification, job
        super().__init__(
            f"The analysis of {qualification.name} (trial version {qualification.data_version}) "
            f"is not ready: job #{job.pk} is computing it. Try again when it has finished."
        )


def analysis_get_or_request(
    *, qualification: Qualification, actor=None
) -> tuple[QualificationAnalysis | None, Job | None]:
    """The cached analysis of the current trials, or the job computing it (queued if need be).

    Requests never compute an analysis themselves: it runs as a job (METHODS' bootstrap takes
    seconds), so a cache miss answers with the job to wait for.
    """
    analysis = selectors.analysis_current(qualification=qualification)
    if analysis is not None:
        return analysis, None
    job = analysis_request(qualification=qualification, actor=actor)
    if job is None:  # cached between the two reads
        return selectors.analysis_current(qualification=qualification), None
    return None, job


def qualification_analysis_run(job: Job, reporter: JobReporter) -> None:
    qualification = Qualification.objects.filter(
        pk=job.params["qualification_id"], workspace=job.workspace
    ).first()
    if qualification is None:
        raise InputError("the qualification was deleted before its analysis ran")
    qualification_analyse(qualification=qualification, job=job, reporter=reporter)
