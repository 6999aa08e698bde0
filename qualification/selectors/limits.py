"""Reads of operating limits: the active one, requalification, review against the baseline."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import orjson
from django.db.models import Case, F, Q, QuerySet, When
from django.http import Http404

from governance.models import AuditEvent, Role
from qualification.analysis.limits import ValueChange, compare_limit_values, model_family_id
from qualification.models import (
    LimitStatus,
    OperatingLimit,
    Qualification,
    QualificationAnalysis,
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
