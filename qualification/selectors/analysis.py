"""Reads of a qualification's analyses and jobs, and the sweep page's cached figures."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import plotly
from django.core.cache import cache

import numfmt
from governance import charts as governance_charts
from governance.models import Job, JobStatus
from qualification import charts
from qualification.analysis.sweep import AnalysisParams
from qualification.formats.trials import FAILURE_CLASSES
from qualification.models import (
    Qualification,
    QualificationAnalysis,
)
from qualification.selectors.qualifications import trial_summary


def analysis_params_for(qualification: Qualification) -> AnalysisParams:
    return AnalysisParams.for_qualification(
        threshold=qualification.threshold,
        consequence=qualification.consequence,
        overrides=qualification.analysis_params,
    )


def params_fingerprint(params: AnalysisParams) -> str:
    return hashlib.sha256(orjson.dumps(params.as_dict(), option=orjson.OPT_SORT_KEYS)).hexdigest()


def analysis_current(*, qualification: Qualification) -> QualificationAnalysis | None:
    """The cached analysis of the qualification's current trials and parameters, if any."""
    fingerprint = params_fingerprint(analysis_params_for(qualification))
    return QualificationAnalysis.objects.filter(
        workspace=qualification.workspace,
        qualification=qualification,
        data_version=qualification.data_version,
        params_fingerprint=fingerprint,
    ).first()


def analysis_latest(*, qualification: Qualification) -> QualificationAnalysis | None:
    """The newest analysis, possibly of an earlier version (shown while the next one runs)."""
    return (
        QualificationAnalysis.objects.filter(
            workspace=qualification.workspace, qualification=qualification
        )
        .order_by("-data_version", "-computed_at")
        .first()
    )


def analysis_result_to_compare(*, qualification: Qualification) -> dict | None:
    """The result a successor compares with: the current analysis of `qualification`, else,
    when it has trials, its latest one."""
    analysis = analysis_current(qualification=qualification)
    if analysis is None and trial_summary(qualification=qualification)["trials"]:
        analysis = analysis_latest(qualification=qualification)
    return analysis.result if analysis else None


def analysis_job_pending(*, qualification: Qualification) -> Job | None:
    return (
        Job.objects.filter(
            workspace=qualification.workspace,
            kind="qualification_analysis",
            params__qualification_id=qualification.pk,
            params__data_version=qualification.data_version,
        )
        .filter(status__in=[JobStatus.QUEUED, JobStatus.RUNNING])
        .order_by("-created_at")
        .first()
    )


def upload_job_running(*, qualification: Qualification) -> Job | None:
    return (
        Job.objects.filter(
            workspace=qualification.workspace,
            kind="trial_upload",
            params__qualification_id=qualification.pk,
            status__in=[JobStatus.QUEUED, JobStatus.RUNNING],
        )
        .order_by("-created_at")
        .first()
    )


# The figures depend on this code: a deploy that changes any of it must not serve old ones.
_CHARTS_FINGERPRINT = hashlib.sha256(
    b"".join(Path(m.__file__).read_bytes() for m in (charts, governance_charts, numfmt))
    + plotly.__version__.encode()
).hexdigest()[:12]


def sweep_figures(*, result: dict, previous_result: dict | None, failures: list[dict]) -> dict:
    """The sweep page's figures, cached: they follow from the stored analyses and the failed
    trials, and building them through Plotly costs several times the rest of the page. The
    key is a hash of those inputs and of the chart code."""
    inputs = orjson.dumps([result, previous_result, failures], option=orjson.OPT_SORT_KEYS)
    key = f"qualification:figures:{_CHARTS_FINGERPRINT}:{hashlib.sha256(inputs).hexdigest()}"
    figures = cache.get(key)
    if figures is None:
        figures = {
            "decline": charts.decline_figure(result, previous=previous_result),
            "outcomes": charts.outcomes_figure(result),
            "cost": charts.cost_figure(result),
            "probability": charts.ecl_probability_figure(result),
            "failures": charts.failure_figure(failures, FAILURE_CLASSES),
        }
        cache.set(key, figures, timeout=24 * 3600)
    return figures
