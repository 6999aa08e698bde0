"""Operating limits: proposal from an analysis, edits, review and withdrawal."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from governance.errors import Conflict, Forbidden
from governance.models import Role
from governance.services import InputError, audit_record, full_clean
from qualification import selectors
from qualification.analysis.limits import RESERVE_ACTIONS, SEED_004_STAGES
from qualification.models import (
    LimitStatus,
    OperatingLimit,
    Qualification,
    QualificationAnalysis,
    QualificationStatus,
)
from qualification.services._common import _user
from qualification.services.analysis import AnalysisPending, analysis_get_or_request
from qualification.services.qualifications import qualification_lock


def _validate_limit_values(values: dict) -> None:
    """Field-named errors for a limit's numbers, sources and stages (before the database)."""
    room = _validate_token_counts(values)
    if values.get("reserve_action") not in RESERVE_ACTIONS:
        raise InputError(f"reserve_action: must be one of {', '.join(RESERVE_ACTIONS)}")
    _validate_source_limits(values.get("source_limits") or {}, values["max_context_tokens"])
    stages = values.get("stage_budgets") or []
    if not isinstance(stages, list):
        raise InputError("stage_budgets: must be a list of stages")
    keys: set[str] = set()
    for position, stage in enumerate(stages):
        _validate_stage(stage, f"stage_budgets[{position}]", room=room, keys=keys)


def _is_tokens(value) -> bool:
    """A whole number of tokens ≥ 0 (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _validate_token_counts(values: dict) -> int:
    """The three sizes, and that the initial assembly leaves the reserve; the room left."""
    for name in ("max_context_tokens", "max_initial_assembly_tokens", "reserve_tokens"):
        if not _is_tokens(values.get(name)):
            raise InputError(f"{name}: must be a whole number of tokens ≥ 0")
    if values["max_context_tokens"] <= 0:
        raise InputError("max_context_tokens: must be positive")
    room = values["max_context_tokens"] - values["reserve_tokens"]
    if values["max_initial_assembly_tokens"] > room:
        raise InputError(
            f"max_initial_assembly_tokens: {values['max_initial_assembly_tokens']:,} leaves less "
            f"than the reserve of {values['reserve_tokens']:,} below the maximum context of "
            f"{values['max_context_tokens']:,}; at most {max(room, 0):,}"
        )
    return room


def _validate_source_limits(sources, max_context_tokens: int) -> None:
    if not isinstance(sources, dict):
        raise InputError("source_limits: must be an object {source: max tokens}")
    for source, tokens in sources.items():
        if not str(source).strip() or len(str(source)) > 64:
            raise InputError("source_limits: source names must be 1–64 characters")
        if not _is_tokens(tokens):
            raise InputError(f"source_limits.{source}: must be a whole number of tokens ≥ 0")
        if tokens > max_context_tokens:
            raise InputError(
                f"source_limits.{source}: {tokens:,} exceeds the maximum context "
                f"{max_context_tokens:,}"
            )


def _validate_stage(stage, where: str, *, room: int, keys: set[str]) -> None:
    """One stage budget: a key not in `keys` (added to it), a budget within the room, a
    target up to it."""
    if not isinstance(stage, dict) or not str(stage.get("key", "")).strip():
        raise InputError(f'{where}: needs a key, e.g. "code_generation"')
    key = str(stage["key"])
    if key in keys:
        raise InputError(f"{where}.key: {key!r} appears twice")
    keys.add(key)
    budget = stage.get("max_tokens")
    if not _is_tokens(budget) or budget == 0:
        raise InputError(f"{where}.max_tokens: must be a positive whole number of tokens")
    if budget > room:
        raise InputError(
            f"{where}.max_tokens: {key} at {budget:,} would eat into the reserve; at most "
            f"{room:,} (maximum context minus reserve)"
        )
    target = stage.get("target_tokens")
    if target is not None and not (_is_tokens(target) and 0 < target <= budget):
        raise InputError(f"{where}.target_tokens: must be a whole number up to max_tokens")
    if stage.get("action") and stage["action"] not in RESERVE_ACTIONS:
        raise InputError(f"{where}.action: must be one of {', '.join(RESERVE_ACTIONS)}")


def _normalise_stages(stages) -> list[dict]:
    return [
        {
            "key": str(s["key"]).strip(),
            "label": str(s.get("label") or s["key"]).strip()[:200],
            "max_tokens": s["max_tokens"],
            "target_tokens": s.get("target_tokens"),
            "action": s.get("action") or "",
        }
        for s in stages or []
    ]


def seed_004_stages(*, room: int) -> tuple[list[dict], list[str]]:
    """Seed 004's five stages, each clamped to the room below the reserve, with notes."""
    stages, notes = [], []
    for stage in SEED_004_STAGES:
        stage = dict(stage)
        if stage["max_tokens"] > room:
            notes.append(
                f"{stage['label']}: {stage['max_tokens']:,} reduced to {room:,} to keep the reserve"
            )
            stage["max_tokens"] = room
        if stage["target_tokens"] and stage["target_tokens"] > stage["max_tokens"]:
            stage["target_tokens"] = None
        stages.append(stage)
    return stages, notes


def _justification(qualification: Qualification, analysis: QualificationAnalysis) -> dict:
    result = analysis.result
    families = []
    for family in result["families"]:
        families.append(
            {
                key: family[key]
                for key in (
                    "family",
                    "tasks",
                    "ecl_tokens",
                    "ecl_status",
                    "ecl_text",
                    "ecl_lower95_tokens",
                    "ecl_lower_tokens",
                    "ecl_lower_confidence",
                    "ecl_interval_tokens",
                    "p_ecl_at_least",
                    "knee_tokens",
                    "saturation_tokens",
                )
            }
        )
    return {
        "qualification": qualification.pk,
        "qualification_name": qualification.name,
        "data_version": analysis.data_version,
        "configuration_fingerprint": qualification.configuration.fingerprint,
        "model": f"{qualification.configuration.model_name} {qualification.configuration.model_version}",
        "workload": str(qualification.workload),
        "threshold": qualification.threshold,
        "consequence": qualification.consequence,
        "strata": result["strata"],
        "status": result["status"],
        "weakest_family": result["weakest_family"],
        "proposed_limit_tokens": result["proposed_limit_tokens"],
        "proposal": result["proposal"],
        "families": families,
        "params": result["params"],
    }


def _require_latest(qualification: Qualification) -> None:
    if qualification.status == QualificationStatus.SUPERSEDED:
        successor = getattr(qualification, "superseded_by", None)
        raise Conflict(
            f"{qualification.name} is superseded"
            + (f" by #{successor.pk} {successor.name}" if successor else "")
            + "; propose limits from the latest qualification."
        )


def _proposal_values(
    result: dict, values: dict, *, use_stage_template: bool
) -> tuple[dict, list[str]]:
    """The analysis's proposal (a quarter of it in reserve) with the given values over it,
    and the notes of the stage template when it is used."""
    proposed = result["proposed_limit_tokens"]
    if proposed is None and "max_context_tokens" not in values:
        raise Conflict(
            "This qualification proposes no limit: "
            + result["proposal"]["reason"]
            + " Give max_context_tokens explicitly to record a limit anyway."
        )
    max_context = values.get("max_context_tokens", proposed)
    reserve = values.get("reserve_tokens", max_context // 4 if isinstance(max_context, int) else 0)
    defaults = {
        "max_context_tokens": max_context,
        "reserve_tokens": reserve,
        "max_initial_assembly_tokens": max_context - reserve
        if isinstance(max_context, int) and isinstance(reserve, int)
        else None,
        "reserve_action": "compact",
        "source_limits": {},
        "stage_budgets": [],
        "rationale": result["proposal"]["margin_reason"],
    }
    defaults.update({k: v for k, v in values.items() if v is not None})
    notes: list[str] = []
    if use_stage_template and not values.get("stage_budgets"):
        room = defaults["max_context_tokens"] - defaults["reserve_tokens"]
        defaults["stage_budgets"], notes = seed_004_stages(room=room)
    return defaults, notes


def _require_within_proposal(max_context_tokens: int, proposed: int | None) -> None:
    """A limit may only be stricter than the qualification's evidence."""
    if proposed is not None and max_context_tokens > proposed:
        raise InputError(
            f"max_context_tokens: {max_context_tokens:,} is above the qualification's "
            f"proposed limit of {proposed:,}; a limit may only be stricter than the evidence"
        )


def operating_limit_propose(
    *,
    qualification: Qualification,
    actor,
    name: str = "",
    values: dict | None = None,
    use_stage_template: bool = False,
) -> OperatingLimit:
    """A proposed limit from a qualification's analysis: its proposed production limit as the
    maximum context, a quarter of it held in reserve, and the numbers that justify it.

    Needs the cached analysis of the current trials; without it, the analysis is queued and
    AnalysisPending (409) names the job.
    """
    qualification.refresh_from_db()
    _require_latest(qualification)
    analysis, job = analysis_get_or_request(qualification=qualification, actor=actor)
    if analysis is None:
        raise AnalysisPending(qualification=qualification, job=job)
    proposed = analysis.result["proposed_limit_tokens"]
    defaults, notes = _proposal_values(
        analysis.result, dict(values or {}), use_stage_template=use_stage_template
    )
    _validate_limit_values(defaults)
    _require_within_proposal(defaults["max_context_tokens"], proposed)
    with transaction.atomic():
        predecessor = selectors.active_limit_for(
            workspace=qualification.workspace,
            model_name=qualification.configuration.model_name,
            workload_name=qualification.workload.name,
        )
        limit = OperatingLimit(
            workspace=qualification.workspace,
            name=(
                name or f"{qualification.configuration.model_name} on {qualification.workload.name}"
            )[:200],
            qualification=qualification,
            configuration_fingerprint=qualification.configuration.fingerprint,
            max_context_tokens=defaults["max_context_tokens"],
            max_initial_assembly_tokens=defaults["max_initial_assembly_tokens"],
            reserve_tokens=defaults["reserve_tokens"],
            reserve_action=defaults["reserve_action"],
            source_limits=defaults["source_limits"],
            stage_budgets=_normalise_stages(defaults["stage_budgets"]),
            rationale=defaults["rationale"],
            justification=_justification(qualification, analysis) | {"notes": notes},
            analysis_data_version=analysis.data_version,
            supersedes=predecessor,
            created_by=_user(actor),
            contributor_ids=[actor.pk] if _user(actor) else [],
        )
        full_clean(
            limit, exclude=["workspace", "qualification", "supersedes"], validate_constraints=True
        )
        limit.save()
        audit_record(
            workspace=qualification.workspace,
            actor=actor,
            action="operating_limit.propose",
            obj=limit,
            data={
                "qualification": qualification.pk,
                "max_context_tokens": limit.max_context_tokens,
                "supersedes": predecessor.pk if predecessor else None,
            },
        )
    return limit


EDITABLE_LIMIT_FIELDS = {
    "name", "max_context_tokens", "max_initial_assembly_tokens", "reserve_tokens",
    "reserve_action", "source_limits", "stage_budgets", "rationale",
}  # fmt: skip


def operating_limit_update(*, limit: OperatingLimit, actor, **changes) -> OperatingLimit:
    """Edit a proposed limit. Approved limits are immutable: propose a successor instead."""
    unknown = sorted(set(changes) - EDITABLE_LIMIT_FIELDS)
    if unknown:
        raise InputError(f"{unknown[0]}: cannot be edited")
    with transaction.atomic():
        current = OperatingLimit.objects.select_for_update().get(pk=limit.pk)
        if current.status != LimitStatus.PROPOSED:
            raise Conflict(
                f"This limit is {current.status} and immutable; propose a new limit that "
                "supersedes it."
            )
        merged = {f: getattr(current, f) for f in EDITABLE_LIMIT_FIELDS} | changes
        _validate_limit_values(merged)
        _require_within_proposal(
            merged["max_context_tokens"], current.justification.get("proposed_limit_tokens")
        )
        before = {k: getattr(current, k) for k in changes}
        if "stage_budgets" in changes:
            changes["stage_budgets"] = _normalise_stages(changes["stage_budgets"])
        for key, value in changes.items():
            setattr(current, key, value)
        if _user(actor) and actor.pk not in current.contributor_ids:
            current.contributor_ids = [*current.contributor_ids, actor.pk]
        full_clean(
            current, exclude=["workspace", "qualification", "supersedes"], validate_constraints=True
        )
        current.save()
        audit_record(
            workspace=current.workspace,
            actor=actor,
            action="operating_limit.update",
            obj=current,
            data={"before": before, "after": {k: getattr(current, k) for k in changes}},
        )
    return current


APPROVAL_CONFIRMATION = "I have read the justification and the flagged changes"
COMMENT_MAX_CHARS = 2000


def operating_limit_approve(
    *,
    limit: OperatingLimit,
    reviewer,
    membership,
    confirmed: bool,
    comment: str = "",
    reviewed: str | None = None,
) -> OperatingLimit:
    """A reviewer who neither proposed nor edited the limit approves it; its predecessor is
    superseded in the same transaction, and its qualification takes no more trials.

    The reviewer must confirm they read the justification and the flagged (removed or
    loosened) values; the audit entry keeps their comment and the flags they confirmed.
    `reviewed` is the `limit_review_digest` of what they read: if the limit or what it is
    compared with changed since, the approval is refused (409).
    """
    if membership is None or membership.role < Role.REVIEWER:
        raise Forbidden("Approving an operating limit needs the reviewer role.")
    comment = (comment or "").strip()
    if len(comment) > COMMENT_MAX_CHARS:
        raise InputError(
            f"comment: at most {COMMENT_MAX_CHARS:,} characters; this one has {len(comment):,}"
        )
    with transaction.atomic():
        current = OperatingLimit.objects.select_for_update().get(pk=limit.pk)
        qualification = _require_approvable(current, reviewer=reviewer, confirmed=confirmed)
        review = selectors.limit_review(limit=current)
        if reviewed is not None and reviewed != selectors.limit_review_digest(
            limit=current, review=review
        ):
            raise Conflict(
                "This limit, or the limit it is compared with, changed after you opened it. "
                "Read it again before approving.",
                code="review_stale",
            )
        predecessor = _supersede_predecessor(current)
        current.status = LimitStatus.APPROVED
        current.approved_by = reviewer
        current.approved_at = timezone.now()
        current.save(update_fields=["status", "approved_by", "approved_at", "updated_at"])
        if qualification.status == QualificationStatus.COLLECTING:
            qualification_lock(qualification=qualification, actor=reviewer)
        if predecessor is not None:
            audit_record(
                workspace=current.workspace,
                actor=reviewer,
                action="operating_limit.supersede",
                obj=predecessor,
                data={"superseded_by": current.pk},
            )
        audit_record(
            workspace=current.workspace,
            actor=reviewer,
            action="operating_limit.approve",
            obj=current,
            data={
                "max_context_tokens": current.max_context_tokens,
                "qualification": current.qualification_id,
                "supersedes": predecessor.pk if predecessor else None,
                "compared_with": review.baseline.pk if review.baseline else None,
                "flagged": [change.text for change in review.flagged],
                "comment": comment,
            },
        )
    return current


def _require_approvable(current: OperatingLimit, *, reviewer, confirmed: bool) -> Qualification:
    """The locked limit may be approved by this reviewer now; its qualification, locked."""
    if reviewer.pk in current.contributor_ids:
        raise Forbidden("You proposed or edited this limit; another reviewer must approve it.")
    if current.status != LimitStatus.PROPOSED:
        raise Conflict(f"This limit is already {current.status}.")
    qualification = Qualification.objects.select_for_update().get(pk=current.qualification_id)
    if qualification.data_version != current.analysis_data_version:
        raise Conflict(
            "Trials were added to the qualification after this limit was proposed; "
            "withdraw it and propose again from the current analysis."
        )
    if confirmed is not True:
        raise InputError(
            f"confirm: Tick “{APPROVAL_CONFIRMATION}” to approve; the approval records "
            "that you did."
        )
    return qualification


def _supersede_predecessor(current: OperatingLimit) -> OperatingLimit | None:
    """The active limit the approved one replaces, now superseded (None if it replaces none)."""
    if not current.supersedes_id:
        return None
    predecessor = OperatingLimit.objects.select_for_update().get(pk=current.supersedes_id)
    if predecessor.status != LimitStatus.APPROVED:
        raise Conflict(
            f"The limit this one supersedes (#{predecessor.pk}) is {predecessor.status}; "
            "only the active limit can be superseded."
        )
    predecessor.status = LimitStatus.SUPERSEDED
    predecessor.save(update_fields=["status", "updated_at"])
    return predecessor


def operating_limit_withdraw(*, limit: OperatingLimit, actor) -> OperatingLimit:
    with transaction.atomic():
        current = OperatingLimit.objects.select_for_update().get(pk=limit.pk)
        if current.status != LimitStatus.PROPOSED:
            raise Conflict(f"Only a proposed limit can be withdrawn; this one is {current.status}.")
        current.status = LimitStatus.WITHDRAWN
        current.save(update_fields=["status", "updated_at"])
        audit_record(
            workspace=current.workspace, actor=actor, action="operating_limit.withdraw", obj=current
        )
    return current
