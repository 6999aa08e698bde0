"""Trial batches for an evaluation (all or nothing) and the decision recorded after it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from governance.services import InputError, audit_record
from qualification.contextfiles import selectors
from qualification.contextfiles.formats.trials import TrialFormatError, check_batch, read_trials
from qualification.contextfiles.models import DecisionRecord, Evaluation, EvaluationArm, Trial


class TrialUploadError(InputError):
    """A trial batch was refused; `errors` lists every problem with its line."""

    def __init__(self, message: str, errors: list[dict]):
        super().__init__(message)
        self.errors = errors


@dataclass
class TrialUploadResult:
    accepted: int
    already_recorded: int
    locked_now: bool
    batch: str


def trials_record(
    *, evaluation: Evaluation, data: bytes | str, content_type: str = "", actor=None
) -> TrialUploadResult:
    """Accept a batch of trials, all or nothing. The first accepted trial locks the registration."""
    try:
        read = read_trials(data, content_type=content_type)
    except TrialFormatError as exc:
        raise TrialUploadError(str(exc), [{"line": None, "error": str(exc)}]) from None
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().get(pk=evaluation.pk)
        if evaluation.status == Evaluation.Status.SUPERSEDED:
            raise InputError(
                f"evaluation #{evaluation.pk} was superseded by #{evaluation.superseded_by.pk}; "
                "record trials against the current registration"
            )
        arms = {arm.name: arm for arm in evaluation.arms.all()}
        baseline = next(a.name for a in arms.values() if a.kind == EvaluationArm.Kind.BASELINE)
        existing = selectors.trial_values(evaluation=evaluation)
        check = check_batch(
            read.rows,
            arms=list(arms),
            baseline=baseline,
            existing=existing,
            refused=read.refused_keys,
        )
        errors = sorted(
            read.errors + check.errors, key=lambda e: (e["line"] is not None, e["line"] or 0)
        )
        if errors:
            raise TrialUploadError(
                f"{len(errors)} problem(s); nothing was saved. First: "
                + (f"line {errors[0]['line']}: " if errors[0]["line"] else "")
                + errors[0]["error"],
                errors,
            )
        batch = uuid.uuid4().hex
        Trial.objects.bulk_create(
            Trial(
                workspace=evaluation.workspace, evaluation=evaluation, arm=arms[row.arm],
                task_id=row.task_id, repeat=row.repeat, success=row.success,
                adherence=row.adherence, input_tokens=row.input_tokens,
                output_tokens=row.output_tokens, model_calls=row.model_calls,
                tool_calls=row.tool_calls, cost=row.cost, latency_ms=row.latency_ms,
                failure_class=row.failure_class, batch=batch,
            )
            for row in check.new
        )  # fmt: skip
        locked_now = bool(check.new) and not evaluation.is_locked
        if locked_now:
            evaluation.status = Evaluation.Status.LOCKED
            evaluation.locked_at = timezone.now()
            evaluation.save(update_fields=["status", "locked_at"])
            audit_record(
                workspace=evaluation.workspace, actor=actor, action="evaluation.lock",
                obj=evaluation, data={"fingerprint": evaluation.fingerprint,
                                      "reason": "first trials accepted"},
            )  # fmt: skip
        if check.new:
            audit_record(
                workspace=evaluation.workspace, actor=actor, action="evaluation.record_trials",
                obj=evaluation,
                data={"batch": batch, "accepted": len(check.new),
                      "already_recorded": check.already_recorded},
            )  # fmt: skip
    return TrialUploadResult(len(check.new), check.already_recorded, locked_now, batch)


def decision_record(
    *, evaluation: Evaluation, action: str, rationale: str, kept: str = "", removed: str = "",
    actor=None,
) -> DecisionRecord:  # fmt: skip
    """Record what was decided after the evaluation, with the results as they stood."""
    if action not in DecisionRecord.Action.values:
        raise InputError(f"action: choose one of {', '.join(DecisionRecord.Action.values)}")
    rationale = (rationale or "").strip()
    if not rationale:
        raise InputError("rationale: say why (a decision without its reason invites reversal)")
    if action == DecisionRecord.Action.REVISE and not (kept.strip() and removed.strip()):
        raise InputError("kept/removed: a revision names what was kept and what was removed")
    if action == DecisionRecord.Action.REMOVE and not removed.strip():
        removed = "the whole file"
    results = selectors.evaluation_results(evaluation=evaluation)
    if not results.has_results:
        raise InputError("there are no results yet; record trials before deciding")
    snapshot = results.to_dict()
    with transaction.atomic():
        record = DecisionRecord.objects.create(
            workspace=evaluation.workspace,
            evaluation=evaluation,
            action=action,
            kept=kept.strip()[:5000],
            removed=removed.strip()[:5000],
            rationale=rationale[:5000],
            verdict=snapshot["verdict"],
            results=snapshot,
            decided_by=actor if getattr(actor, "pk", None) else None,
        )
        audit_record(
            workspace=evaluation.workspace, actor=actor, action="evaluation.decide", obj=record,
            data={"evaluation": evaluation.pk, "action": action, "verdict": snapshot["verdict"]},
        )  # fmt: skip
    return record
