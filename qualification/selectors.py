"""Reads for qualification, always scoped by workspace. A missing or foreign object is a 404."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pandas as pd
import plotly
from django.core.cache import cache
from django.db.models import Case, Count, F, Max, Q, QuerySet, When
from django.http import Http404

import numfmt
from governance import charts as governance_charts
from governance.models import AuditEvent, Job, JobStatus, Role
from qualification import charts
from qualification.analysis.limits import ValueChange, compare_limit_values, model_family_id
from qualification.analysis.sweep import AnalysisParams, trials_frame
from qualification.formats.trials import FAILURE_CLASSES
from qualification.models import (
    AssemblyAudit,
    LimitStatus,
    OperatingLimit,
    Qualification,
    QualificationAnalysis,
    Trial,
    TrialUpload,
)


def qualifications_for(*, workspace) -> QuerySet[Qualification]:
    return (
        Qualification.objects.filter(workspace=workspace)
        .select_related("configuration", "workload", "supersedes", "created_by")
        .annotate(trial_count=Count("trials"))
        .order_by("-created_at", "-id")
    )


def qualification_get(*, workspace, pk) -> Qualification:
    qualification = (
        Qualification.objects.filter(workspace=workspace, pk=pk)
        .select_related("configuration", "workload", "supersedes__configuration", "created_by")
        .first()
    )
    if qualification is None:
        raise Http404("No such qualification in this workspace.")
    return qualification


def trials_for(*, qualification: Qualification) -> QuerySet[Trial]:
    return Trial.objects.filter(
        workspace=qualification.workspace, qualification=qualification
    ).select_related("task__family", "session")


def uploads_for(*, qualification: Qualification) -> QuerySet[TrialUpload]:
    return TrialUpload.objects.filter(
        workspace=qualification.workspace, qualification=qualification
    ).select_related("job", "uploaded_by")


def trial_summary(*, qualification: Qualification) -> dict:
    trials = Trial.objects.filter(workspace=qualification.workspace, qualification=qualification)
    summary = trials.aggregate(
        trials=Count("id"),
        tasks=Count("task", distinct=True),
        strata=Count("stratum_tokens", distinct=True),
        max_repeat=Max("repeat"),
    )
    summary["families"] = list(
        trials.values("task__family__key")
        .annotate(trials=Count("id"), tasks=Count("task", distinct=True))
        .order_by("task__family__key")
    )
    return summary


def failure_classes(*, qualification: Qualification) -> list[dict]:
    """Failed trials by stratum and failure class ('' = not classified), all families."""
    return list(
        Trial.objects.filter(
            workspace=qualification.workspace, qualification=qualification, task_correct=False
        )
        .values("stratum_tokens", "failure_class")
        .annotate(n=Count("id"))
        .order_by("stratum_tokens", "failure_class")
    )


def trial_frame(*, qualification: Qualification) -> pd.DataFrame:
    """The columns analysis needs, straight from the database (no ORM objects)."""
    rows = Trial.objects.filter(
        workspace=qualification.workspace, qualification=qualification
    ).values_list(
        "task__family__key",
        "task__external_id",
        "stratum_tokens",
        "repeat",
        "task_correct",
        "retrieval_correct",
        "input_tokens",
        "output_tokens",
        "model_calls",
        "tool_calls",
        "cost_usd",
        "latency_ms",
    )
    return trials_frame(list(rows))


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


def latest_qualification_for(*, workspace, model_name: str, workload_name: str | None = None):
    qualifications = Qualification.objects.filter(
        workspace=workspace, configuration__model_name=model_name
    )
    if workload_name is not None:
        qualifications = qualifications.filter(workload__name=workload_name)
    return (
        qualifications.select_related("configuration", "workload")
        .order_by("-created_at", "-id")
        .first()
    )


# --- operating limits ----------------------------------------------------------------


def operating_limits_for(*, workspace) -> QuerySet[OperatingLimit]:
    return OperatingLimit.objects.filter(workspace=workspace).select_related(
        "qualification__configuration",
        "qualification__workload",
        "created_by",
        "approved_by",
        "supersedes",
    )


def operating_limit_get(*, workspace, pk) -> OperatingLimit:
    limit = operating_limits_for(workspace=workspace).filter(pk=pk).first()
    if limit is None:
        raise Http404("No such operating limit in this workspace.")
    return limit


def active_limit_for(*, workspace, model_name: str, workload_name: str) -> OperatingLimit | None:
    return (
        OperatingLimit.objects.filter(
            workspace=workspace,
            status=LimitStatus.APPROVED,
            qualification__configuration__model_name=model_name,
            qualification__workload__name=workload_name,
        )
        .order_by("-approved_at", "-id")
        .first()
    )


@dataclass(frozen=True)
class ActiveLimit:
    """The approved limit a harness session runs under, with the qualified ECL behind it."""

    limit: OperatingLimit | None
    model_id: str
    candidates: int  # approved limits of this model (one per workload)

    @property
    def version(self) -> str:
        """Changes whenever the answer changes: approved limits are immutable."""
        if self.limit is None:
            return "none"
        return f"{self.limit.pk}:{self.limit.approved_at:%Y%m%dT%H%M%S.%f}"

    @property
    def weakest_family(self) -> dict | None:
        justification = self.limit.justification if self.limit else {}
        weakest = justification.get("weakest_family")
        for family in justification.get("families", []):
            if family.get("family") == weakest:
                return family
        return None


def active_limit_for_model_id(*, workspace, model_id: str, workload: str = "") -> ActiveLimit:
    """The approved limit for a harness's model id (`claude-sonnet-4-20250514`, a Bedrock or
    Vertex id): configurations match on `model_family_id`, so snapshot dates and provider
    prefixes are ignored. With several workloads approved for the model and none named, the
    strictest limit (smallest maximum context) applies."""
    wanted = model_family_id(model_id)
    approved = operating_limits_for(workspace=workspace).filter(status=LimitStatus.APPROVED)
    if workload:
        approved = approved.filter(qualification__workload__name=workload)
    matches = [
        limit
        for limit in approved
        if model_family_id(limit.qualification.configuration.model_name) == wanted
    ]
    matches.sort(key=lambda limit: (limit.max_context_tokens, -limit.approved_at.timestamp()))
    return ActiveLimit(
        limit=matches[0] if matches else None, model_id=model_id, candidates=len(matches)
    )


@dataclass(frozen=True)
class Requalification:
    due: bool
    latest: Qualification | None = None
    changes: list[tuple[str, object, object]] = field(default_factory=list)
    successor: OperatingLimit | None = None  # a proposal waiting for review, if any


def requalification_status(
    *, limit: OperatingLimit, latest_memo: dict | None = None
) -> Requalification:
    """Due when the latest qualification of the same model and workload was run under a
    different configuration fingerprint (or workload version) than the one this limit cites.
    `latest_memo` shares the latest-qualification lookups across the limits of one list."""
    if limit.status != LimitStatus.APPROVED:
        return Requalification(due=False)
    own = limit.qualification
    key = (own.configuration.model_name, own.workload.name)
    if latest_memo is not None and key in latest_memo:
        latest = latest_memo[key]
    else:
        latest = latest_qualification_for(
            workspace=limit.workspace, model_name=key[0], workload_name=key[1]
        )
        if latest_memo is not None:
            latest_memo[key] = latest
    if latest is None or (
        latest.configuration.fingerprint == limit.configuration_fingerprint
        and latest.workload_id == own.workload_id
    ):
        return Requalification(due=False, latest=latest)
    before, after = own.configuration.pinned_fields(), latest.configuration.pinned_fields()
    changes = [(key, before[key], after[key]) for key in before if before[key] != after[key]]
    if latest.workload_id != own.workload_id:
        changes.append(("workload", str(own.workload), str(latest.workload)))
    successor = limit.successors.filter(status=LimitStatus.PROPOSED).order_by("-created_at").first()
    return Requalification(due=True, latest=latest, changes=changes, successor=successor)


def limit_values(limit: OperatingLimit) -> dict:
    """A limit's values as plain data, for `compare_limit_values`."""
    return {
        "max_context_tokens": limit.max_context_tokens,
        "max_initial_assembly_tokens": limit.max_initial_assembly_tokens,
        "reserve_tokens": limit.reserve_tokens,
        "reserve_action": limit.reserve_action,
        "source_limits": limit.source_limits,
        "stage_budgets": limit.stage_budgets,
    }


def limit_baseline(*, limit: OperatingLimit) -> OperatingLimit | None:
    """What a limit replaces: the limit it supersedes or, for a proposal that supersedes none,
    the approved limit of the same model (same workload first) that is active now."""
    if limit.supersedes_id:
        return limit.supersedes
    if limit.status != LimitStatus.PROPOSED:
        return None
    own = limit.qualification
    return (
        OperatingLimit.objects.filter(
            workspace=limit.workspace,
            status=LimitStatus.APPROVED,
            qualification__configuration__model_name=own.configuration.model_name,
        )
        .exclude(pk=limit.pk)
        .select_related("qualification__workload")
        .order_by(
            Case(When(qualification__workload_id=own.workload_id, then=0), default=1),
            "-approved_at",
            "-id",
        )
        .first()
    )


@dataclass(frozen=True)
class LimitReview:
    """A limit against the one it replaces: every changed value, and which to flag."""

    baseline: OperatingLimit | None
    changes: list[ValueChange] = field(default_factory=list)
    fingerprint: tuple[str, str] | None = None  # (before, after) when the configuration changed
    is_predecessor: bool = False  # the baseline is the limit this one supersedes

    @property
    def flagged(self) -> list[ValueChange]:
        return [c for c in self.changes if c.flagged]

    @property
    def others(self) -> list[ValueChange]:
        """Stricter, new or merely changed values."""
        return [c for c in self.changes if not c.flagged]


def limit_review(*, limit: OperatingLimit) -> LimitReview:
    baseline = limit_baseline(limit=limit)
    if baseline is None:
        return LimitReview(baseline=None)
    fingerprint = None
    if baseline.configuration_fingerprint != limit.configuration_fingerprint:
        fingerprint = (baseline.configuration_fingerprint, limit.configuration_fingerprint)
    return LimitReview(
        baseline=baseline,
        changes=compare_limit_values(limit_values(baseline), limit_values(limit)),
        fingerprint=fingerprint,
        is_predecessor=baseline.pk == limit.supersedes_id,
    )


def limit_review_digest(*, limit: OperatingLimit, review: LimitReview) -> str:
    """A fingerprint of what a reviewer reads before approving: the limit's values and
    justification, and what it is compared with. Approving with an older one is refused."""
    content = {
        "values": limit_values(limit),
        "justification": limit.justification,
        "baseline": review.baseline.pk if review.baseline else None,
        "baseline_values": limit_values(review.baseline) if review.baseline else None,
    }
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def limit_approval(*, limit: OperatingLimit) -> AuditEvent | None:
    """The audit entry of a limit's approval: who, when and their comment."""
    if limit.approved_at is None:
        return None
    if hasattr(limit, "_approval"):  # set by limits_prefetch_approvals
        return limit._approval
    return (
        AuditEvent.objects.filter(
            workspace=limit.workspace,
            action="operating_limit.approve",
            object_type=OperatingLimit._meta.label_lower,
            object_id=str(limit.pk),
        )
        .select_related("actor")
        .order_by("-created_at", "-id")
        .first()
    )


def limits_prefetch_approvals(*, workspace, limits) -> list[OperatingLimit]:
    """The approval entries of all `limits` in one query, for `limit_approval` to return
    without a query per limit on list pages and the list API."""
    limits = list(limits)
    ids = [str(limit.pk) for limit in limits if limit.approved_at is not None]
    latest: dict[str, AuditEvent] = {}
    events = (
        AuditEvent.objects.filter(
            workspace=workspace,
            action="operating_limit.approve",
            object_type=OperatingLimit._meta.label_lower,
            object_id__in=ids,
        )
        .select_related("actor")
        .order_by("created_at", "id")
    )
    for event in events:
        latest[event.object_id] = event  # ordered oldest first: the last one stays
    for limit in limits:
        limit._approval = latest.get(str(limit.pk))
    return limits


def limit_analysis(*, limit: OperatingLimit) -> QualificationAnalysis | None:
    """The analysis a limit was proposed from (the trial version it cites)."""
    return (
        QualificationAnalysis.objects.filter(
            workspace=limit.workspace,
            qualification_id=limit.qualification_id,
            data_version=limit.analysis_data_version,
        )
        .order_by("-computed_at")
        .first()
    )


def limits_awaiting_review(*, membership, qualification: Qualification | None = None) -> list:
    """Proposed limits this member may approve: the reviewer role, neither proposed nor
    edited by them, and still approvable (its trials unchanged since it was proposed, and the
    limit it supersedes still approved). Oldest first."""
    if not membership.has_role(Role.REVIEWER):
        return []
    limits = (
        operating_limits_for(workspace=membership.workspace)
        .filter(
            status=LimitStatus.PROPOSED,
            analysis_data_version=F("qualification__data_version"),
        )
        .exclude(Q(supersedes__isnull=False) & ~Q(supersedes__status=LimitStatus.APPROVED))
    )
    if qualification is not None:
        limits = limits.filter(qualification=qualification)
    # contributor_ids is a short JSON list; SQLite cannot test membership in SQL.
    return [
        limit
        for limit in limits.order_by("created_at", "id")
        if membership.user_id not in limit.contributor_ids
    ]


def requalification_due_count(*, workspace) -> int:
    return sum(
        1
        for limit in operating_limits_for(workspace=workspace).filter(status=LimitStatus.APPROVED)
        if requalification_status(limit=limit).due
    )


# --- assembly audits -------------------------------------------------------------------


def audits_for(*, workspace) -> QuerySet[AssemblyAudit]:
    return AssemblyAudit.objects.filter(workspace=workspace).select_related(
        "operating_limit", "created_by"
    )


def audit_get(*, workspace, pk) -> AssemblyAudit:
    audit = audits_for(workspace=workspace).filter(pk=pk).first()
    if audit is None:
        raise Http404("No such budget check in this workspace.")
    return audit


def audit_counts(*, workspace) -> dict:
    return AssemblyAudit.objects.filter(workspace=workspace).aggregate(
        total=Count("id"), over=Count("id", filter=Q(verdict="over"))
    )


# --- for other areas: the lab's view of a model ---------------------------------------------


@dataclass(frozen=True)
class LabStratum:
    tokens: int
    accuracy: float | None
    ci: tuple[float | None, float | None]
    tasks: int


@dataclass(frozen=True)
class LabFamily:
    family: str
    strata: list[LabStratum]
    ecl_tokens: int | None
    ecl_status: str
    ecl_text: str
    ecl_lower95_tokens: int | None
    knee_tokens: int | None

    def as_chart_dict(self) -> dict:
        """The shape `qualification.charts.add_decline_curve` draws."""
        return {
            "family": self.family,
            "strata": [
                {"tokens": s.tokens, "accuracy": s.accuracy, "ci": list(s.ci), "tasks": s.tasks}
                for s in self.strata
            ],
            "ecl_tokens": self.ecl_tokens,
            "ecl_status": self.ecl_status,
            "knee_tokens": self.knee_tokens,
        }


@dataclass(frozen=True)
class LabReference:
    qualification_id: int
    qualification_name: str
    model_name: str
    model_version: str
    configuration_fingerprint: str
    workload: str
    threshold: float
    consequence: str
    data_version: int
    families: list[LabFamily]
    weakest_family: str | None
    proposed_limit_tokens: int | None
    interval_note: str


def lab_reference_for_model(*, workspace, model_name: str) -> LabReference | None:
    """What the lab measured for a model: the latest analysed qualification of that model name.

    Per family: accuracy by stratum with its task-clustered interval, the ECL (fixed-sequence
    rule), the 95% lower ECL and the knee; plus θ and the proposed production limit. None when
    no qualification of this model has an analysis of its current trials. Draw a family's curve
    with `qualification.charts.add_decline_curve(fig, family.as_chart_dict(), theta=…)`.
    """
    candidates = (
        Qualification.objects.filter(workspace=workspace, configuration__model_name=model_name)
        .select_related("configuration", "workload")
        .order_by("-created_at", "-id")
    )
    for qualification in candidates[:20]:
        analysis = analysis_current(qualification=qualification)
        if analysis is None:
            continue
        result = analysis.result
        families = [
            LabFamily(
                family=f["family"],
                strata=[
                    LabStratum(s["tokens"], s["accuracy"], tuple(s["ci"]), s["tasks"])
                    for s in f["strata"]
                ],
                ecl_tokens=f["ecl_tokens"],
                ecl_status=f["ecl_status"],
                ecl_text=f["ecl_text"],
                ecl_lower95_tokens=f["ecl_lower95_tokens"],
                knee_tokens=f["knee_tokens"],
            )
            for f in result["families"]
        ]
        alpha = result["params"]["alpha"]
        return LabReference(
            qualification_id=qualification.pk,
            qualification_name=qualification.name,
            model_name=qualification.configuration.model_name,
            model_version=qualification.configuration.model_version,
            configuration_fingerprint=qualification.configuration.fingerprint,
            workload=str(qualification.workload),
            threshold=qualification.threshold,
            consequence=qualification.consequence,
            data_version=analysis.data_version,
            families=families,
            weakest_family=result["weakest_family"],
            proposed_limit_tokens=result["proposed_limit_tokens"],
            interval_note=(
                f"two-sided {1 - 2 * alpha:.0%} task-clustered intervals "
                f"(lower edge = one-sided {1 - alpha:.0%} bound)"
            ),
        )
    return None


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
