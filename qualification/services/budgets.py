"""Budget checks against an approved limit, recorded as assembly audits."""

from __future__ import annotations

import hashlib

from django.db import transaction

from governance.errors import Conflict
from governance.services import InputError, audit_record
from qualification.analysis.limits import LimitSpec, StageBudget, check_budget
from qualification.models import AssemblyAudit, LimitStatus, OperatingLimit
from qualification.services._common import _user

MAX_PROMPT_CHARS = 2_000_000


def limit_spec(limit: OperatingLimit) -> LimitSpec:
    return LimitSpec(
        max_context_tokens=limit.max_context_tokens,
        max_initial_assembly_tokens=limit.max_initial_assembly_tokens,
        reserve_tokens=limit.reserve_tokens,
        reserve_action=limit.reserve_action,
        source_limits=dict(limit.source_limits),
        stages=[
            StageBudget(
                key=s["key"],
                label=s.get("label") or s["key"],
                max_tokens=s["max_tokens"],
                target_tokens=s.get("target_tokens"),
                action=s.get("action") or "",
            )
            for s in limit.stage_budgets
        ],
    )


def _clean_allocation(allocation) -> dict[str, int]:
    if not isinstance(allocation, dict) or not allocation:
        raise InputError('allocation: give tokens by source, e.g. {"system": 3000}')
    cleaned = {}
    for source, tokens in allocation.items():
        name = str(source).strip()
        if not name or len(name) > 64:
            raise InputError("allocation: source names must be 1–64 characters")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InputError(f"allocation.{name}: must be a whole number of tokens ≥ 0")
        cleaned[name] = tokens
    return cleaned


def _clean_omissions(omissions) -> list[dict]:
    if omissions in (None, ""):
        return []
    if not isinstance(omissions, list):
        raise InputError("omissions: must be a list of truncation or omission decisions")
    cleaned = []
    for position, item in enumerate(omissions):
        if isinstance(item, str):
            item = {"note": item}
        if not isinstance(item, dict):
            raise InputError(f"omissions[{position}]: must be an object or a sentence")
        tokens = item.get("tokens")
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0
        ):
            raise InputError(f"omissions[{position}].tokens: must be a whole number ≥ 0")
        decision = item.get("decision", "omitted")
        if decision not in ("omitted", "truncated", "summarised", "summarized"):
            raise InputError(
                f"omissions[{position}].decision: must be omitted, truncated or summarised"
            )
        cleaned.append({**item, "decision": decision})
    return cleaned


def budget_check_record(
    *,
    limit: OperatingLimit,
    allocation,
    stage: str = "",
    assembled_prompt: str = "",
    omissions=None,
    run_ref: str = "",
    source: str = "api",
    actor=None,
) -> AssemblyAudit:
    """Check an assembly against an active limit and keep it as an assembly audit."""
    if limit.status != LimitStatus.APPROVED:
        successor = limit.successors.filter(status=LimitStatus.APPROVED).first()
        hint = f" Check against #{successor.pk} instead." if successor else ""
        raise Conflict(
            f"Limit #{limit.pk} is {limit.status}; budget checks run against an approved limit.{hint}"
        )
    allocation = _clean_allocation(allocation)
    omissions = _clean_omissions(omissions)
    assembled_prompt = assembled_prompt or ""
    if len(assembled_prompt) > MAX_PROMPT_CHARS:
        raise InputError(f"assembled_prompt: longer than {MAX_PROMPT_CHARS:,} characters")
    try:
        verdict = check_budget(limit_spec(limit), allocation, stage or "")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    with transaction.atomic():
        audit = AssemblyAudit.objects.create(
            workspace=limit.workspace,
            operating_limit=limit,
            stage=stage or "",
            allocation=allocation,
            total=verdict.total,
            limit=verdict.limit,
            reserve_left=verdict.reserve_left,
            verdict=verdict.verdict,
            over_sources=verdict.over_sources,
            unbudgeted_sources=verdict.unbudgeted_sources,
            reasons=verdict.reasons,
            action=verdict.action,
            above_target=verdict.above_target,
            assembled_prompt=assembled_prompt,
            prompt_sha256=hashlib.sha256(assembled_prompt.encode()).hexdigest()
            if assembled_prompt
            else "",
            prompt_chars=len(assembled_prompt),
            omissions=omissions,
            run_ref=run_ref[:200],
            source=source,
            created_by=_user(actor),
        )
        audit_record(
            workspace=limit.workspace,
            actor=actor,
            action="budget_check.record",
            obj=audit,
            data={"operating_limit": limit.pk, "verdict": verdict.verdict, "total": verdict.total},
        )
    return audit


def verdict_dict(audit: AssemblyAudit) -> dict:
    """The check's answer as the API returns it."""
    return {
        "verdict": audit.verdict,
        "total": audit.total,
        "limit": audit.limit,
        "reserve_left": audit.reserve_left,
        "over_sources": audit.over_sources,
        "action": audit.action,
    }
