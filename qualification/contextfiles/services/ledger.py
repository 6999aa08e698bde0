"""The instruction ledger: who owns each instruction, why it is there, when it is reviewed."""

from __future__ import annotations

from datetime import date

from django.db import transaction

from governance.services import InputError, audit_record
from qualification.contextfiles import selectors
from qualification.contextfiles.analysis.parsing import Category, estimate_tokens
from qualification.contextfiles.models import Evaluation, EvaluationArm, Instruction

LEDGER_FIELDS = (
    "owner",
    "reason",
    "affects",
    "review_trigger",
    "deletion_condition",
    "last_reviewed_on",
    "review_due_on",
    "category",
)
CARRIED_FIELDS = LEDGER_FIELDS[:-1]


def instruction_update_ledger(*, instruction: Instruction, actor, **changes) -> Instruction:
    """Edit the ledger entry (and category) of an instruction of the latest revision."""
    unknown = set(changes) - set(LEDGER_FIELDS)
    if unknown:
        raise InputError(f"not ledger fields: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        instruction = Instruction.objects.select_for_update().get(pk=instruction.pk)
        latest = selectors.latest_revision(context_file=instruction.revision.context_file)
        if latest is None or latest.pk != instruction.revision_id:
            raise InputError(
                f"this instruction belongs to revision {instruction.revision.revision}, not the "
                f"latest ({latest.revision if latest else '–'}); edit the latest revision's ledger"
            )
        diff = {}
        for name, value in changes.items():
            value = _ledger_value(name, value)
            if getattr(instruction, name) != value:
                diff[name] = [_jsonable(getattr(instruction, name)), _jsonable(value)]
                setattr(instruction, name, value)
        open_evaluations = []
        if "category" in diff:
            open_evaluations = _evaluations_ablating(instruction)
            instruction.category_corrected = True
            instruction.category_basis = "set by a person"
        if (
            instruction.last_reviewed_on
            and instruction.review_due_on
            and instruction.review_due_on < instruction.last_reviewed_on
        ):
            raise InputError("review_due_on: the next review cannot be before the last one")
        if diff:
            instruction.save()
            for evaluation in open_evaluations:
                _rebuild_arm_estimates(evaluation)
            audit_record(
                workspace=instruction.workspace,
                actor=actor,
                action="instruction.update_ledger",
                obj=instruction,
                data={"changes": diff},
            )
    return instruction


def _ledger_value(name: str, value):
    """A ledger field's value, checked: a category, a date, or text (the owner up to 200
    characters, notes up to 5,000)."""
    if name == "category":
        return _category(value)
    if name in {"last_reviewed_on", "review_due_on"}:
        return _date(name, value)
    value = ("" if value is None else str(value)).strip()
    limit = 200 if name == "owner" else 5000
    if len(value) > limit:
        raise InputError(f"{name}: at most {limit} characters")
    return value


def _evaluations_ablating(instruction: Instruction) -> list[Evaluation]:
    """A category decides which ablation arm holds the instruction. Once an evaluation of this
    revision has results its arms are pre-registered, so the category is fixed; before that,
    the open evaluations are returned so that their arms' token estimates follow."""
    evaluations = Evaluation.objects.filter(
        revision_id=instruction.revision_id, arms__kind=EvaluationArm.Kind.ABLATION
    ).distinct()
    locked = [e for e in evaluations if e.status == Evaluation.Status.LOCKED]
    if locked:
        raise InputError(
            f"category: evaluation #{locked[0].pk} has results and ablates this revision's "
            "categories, so they are fixed by its pre-registration; import a new revision to "
            "recategorise"
        )
    return [e for e in evaluations if e.status == Evaluation.Status.REGISTERED]


def _rebuild_arm_estimates(evaluation: Evaluation) -> None:
    instructions = list(evaluation.revision.instructions.values_list("category", "text"))
    for arm in evaluation.arms.filter(kind=EvaluationArm.Kind.ABLATION):
        arm.token_estimate = _arm_tokens(instructions, arm.categories)
        arm.save(update_fields=["token_estimate"])


def _arm_tokens(instructions: list[tuple[str, str]], categories: list[str]) -> int:
    return estimate_tokens("\n\n".join(t for c, t in instructions if c in categories))


def _category(value) -> str:
    try:
        return Category(str(value)).value
    except ValueError:
        names = ", ".join(c.value for c in Category)
        raise InputError(f"category: {value!r} is not one of {names}") from None


def _date(name: str, value):
    if value in (None, ""):
        return None
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise InputError(f"{name}: {value!r} is not a date (YYYY-MM-DD)") from None


def _jsonable(value):
    return value.isoformat() if isinstance(value, date) else value
