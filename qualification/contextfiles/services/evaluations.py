"""Evaluations: registration (locked by the first trial), changes before the lock, arms."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from django.db import transaction

from governance.services import InputError, audit_record
from qualification.contextfiles import selectors
from qualification.contextfiles.models import (
    ContextFile,
    ContextFileRevision,
    Evaluation,
    EvaluationArm,
)
from qualification.contextfiles.services.ledger import _arm_tokens, _category, _jsonable

REGISTRATION_FIELDS = (
    "name",
    "revision_id",
    "primary_metric",
    "cost_measures",
    "model_name",
    "model_version",
    "harness_version",
    "decoding",
    "task_set_version",
    "expected_tasks",
    "delta",
    "margin",
    "target_power",
    "pilot_discordance",
    "notes",
)
COST_MEASURES = (
    "input_tokens",
    "output_tokens",
    "model_calls",
    "tool_calls",
    "cost_per_completed_task",
)
SMALL_TASK_SET = 80


@dataclass
class Registration:
    """Validated registration fields, ready to save or compare."""

    values: dict
    ablations: list[dict] = field(default_factory=list)


def _registration(
    *, context_file: ContextFile, data: dict, base: Evaluation | None = None
) -> Registration:
    values = {name: getattr(base, name) for name in REGISTRATION_FIELDS} if base else {}
    values.update({k: v for k, v in data.items() if k in REGISTRATION_FIELDS or k == "revision"})
    values["revision_id"] = _registration_revision(context_file, values)
    values.update(_registration_names(values))
    values["primary_metric"] = str(values.get("primary_metric") or "task success").strip()[:200]
    values["cost_measures"] = _cost_measures(values.get("cost_measures"))
    values["decoding"] = _decoding(values.get("decoding"))
    values.update(_design(values))
    values["notes"] = str(values.get("notes") or "")[:5000]
    return Registration(values=values)


def _registration_revision(context_file: ContextFile, values: dict) -> int:
    """The id of the registered revision: the one named (of this file), else the latest."""
    revision = values.pop("revision", None)
    if revision is not None:
        revision_obj = (
            revision
            if isinstance(revision, ContextFileRevision)
            else context_file.revisions.filter(pk=revision).first()
        )
        if revision_obj is None or revision_obj.context_file_id != context_file.pk:
            raise InputError(f"revision: {revision!r} is not a revision of {context_file}")
        return revision_obj.pk
    if values.get("revision_id"):
        return values["revision_id"]
    latest = selectors.latest_revision(context_file=context_file)
    if latest is None:
        raise InputError("revision: import the file before registering an evaluation")
    return latest.pk


def _registration_names(values: dict) -> dict:
    """The required names of the run (what was evaluated, with what), stripped."""
    names = {}
    for name in ("name", "model_name", "model_version", "harness_version", "task_set_version"):
        value = str(values.get(name) or "").strip()
        if not value:
            raise InputError(f"{name}: required before any result is accepted")
        if len(value) > 200:
            raise InputError(f"{name}: at most 200 characters")
        names[name] = value
    return names


def _cost_measures(measures) -> list[str]:
    measures = measures or list(COST_MEASURES)
    if not isinstance(measures, list) or any(m not in COST_MEASURES for m in measures):
        raise InputError(f"cost_measures: choose from {', '.join(COST_MEASURES)}")
    return list(dict.fromkeys(measures))


def _decoding(decoding) -> dict:
    """The sampling settings: an object (or its JSON text), never empty."""
    decoding = decoding or {}
    if isinstance(decoding, str):
        try:
            decoding = json.loads(decoding) if decoding.strip() else {}
        except json.JSONDecodeError as exc:
            raise InputError(f"decoding: not JSON ({exc.msg})") from None
    if not isinstance(decoding, dict):
        raise InputError('decoding: give an object such as {"temperature": 0}')
    if not decoding:
        raise InputError(
            'decoding: required; record the sampling settings, e.g. {"temperature": 0}'
        )
    return decoding


def _blank(value) -> bool:
    return value in (None, "")


def _design(values: dict) -> dict:
    """The design numbers, with their defaults: a small task set gets a wider margin."""
    expected = values.get("expected_tasks")
    expected = (
        None if _blank(expected) else _number("expected_tasks", expected, integer=True, low=1)
    )
    delta, margin = values.get("delta"), values.get("margin")
    power, psi = values.get("target_power"), values.get("pilot_discordance")
    if _blank(margin):
        margin = 0.15 if expected is not None and expected < SMALL_TASK_SET else 0.10
    return {
        "expected_tasks": expected,
        "delta": 0.05 if _blank(delta) else _number("delta", delta, low=0, high=0.99),
        "margin": _number("margin", margin, low=0.005, high=0.5),
        "target_power": 0.8
        if _blank(power)
        else _number("target_power", power, low=0.5, high=0.99),
        "pilot_discordance": None
        if _blank(psi)
        else _number("pilot_discordance", psi, low=0.001, high=1),
    }


def _number(name: str, value, *, low=None, high=None, integer=False):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: {value!r} is not a number") from None
    if isinstance(value, bool) or number != number:
        raise InputError(f"{name}: {value!r} is not a number")
    if integer:
        if number != int(number):
            raise InputError(f"{name}: must be a whole number")
        number = int(number)
    if (low is not None and number < low) or (high is not None and number > high):
        raise InputError(f"{name}: must be between {low} and {high}, got {value}")
    return number


def _ablations(raw) -> list[dict]:
    """Ablation arms: [{"name": "rules-only", "categories": ["failure_prevention"]}, …]."""
    arms = []
    names = {"baseline", "full"}
    for index, item in enumerate(raw or [], start=1):
        arm = _ablation(index, item)
        if arm["name"] in names:
            raise InputError(f"ablations[{index}]: the arm name {arm['name']!r} is already used")
        names.add(arm["name"])
        arms.append(arm)
    return arms


def _ablation(index: int, item) -> dict:
    """One ablation arm: a category (or a list of them) to keep, and a name."""
    if isinstance(item, str):
        item = {"categories": [item]}
    if not isinstance(item, dict):
        raise InputError(f"ablations[{index}]: give an object with categories")
    categories = item.get("categories") or []
    if isinstance(categories, str):
        categories = [categories]
    if not categories:
        raise InputError(f"ablations[{index}]: name at least one category to keep")
    categories = [_category(c) for c in categories]
    name = str(item.get("name") or "only-" + "-".join(categories)).strip().replace("_", "-")
    if not name or len(name) > 64 or not all(ch.isalnum() or ch == "-" for ch in name):
        raise InputError(f"ablations[{index}]: name may hold letters, digits and '-' only")
    return {"name": name, "categories": sorted(set(categories))}


def _fingerprint(values: dict, ablations: list[dict]) -> str:
    payload = {k: values.get(k) for k in REGISTRATION_FIELDS} | {"ablations": ablations}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _create_evaluation(*, context_file, registration: Registration, ablations, actor, **extra):
    values = registration.values
    evaluation = Evaluation.objects.create(
        workspace=context_file.workspace,
        context_file=context_file,
        fingerprint=_fingerprint(values, ablations),
        created_by=actor if getattr(actor, "pk", None) else None,
        **values,
        **extra,
    )
    _rebuild_arms(evaluation, ablations)
    return evaluation


def evaluation_register(*, context_file: ContextFile, data: dict, actor=None) -> Evaluation:
    """Pre-register an evaluation: arms are the baseline, the full file and any ablations."""
    registration = _registration(context_file=context_file, data=data)
    ablations = _ablations(data.get("ablations"))
    with transaction.atomic():
        evaluation = _create_evaluation(
            context_file=context_file, registration=registration, ablations=ablations, actor=actor
        )
        audit_record(
            workspace=context_file.workspace, actor=actor, action="evaluation.register",
            obj=evaluation,
            data={"fingerprint": evaluation.fingerprint, "arms": ["baseline", "full"]
                  + [a["name"] for a in ablations]} | _audit_values(registration.values),
        )  # fmt: skip
    return evaluation


def _audit_values(values: dict) -> dict:
    return {k: _jsonable(v) for k, v in values.items()}


@dataclass
class ChangeResult:
    evaluation: Evaluation
    superseded: Evaluation | None
    changed: list[str]


def evaluation_change(
    *, evaluation: Evaluation, data: dict, actor=None, reason: str = ""
) -> ChangeResult:
    """Change a registration. Before results: in place. After: a new evaluation supersedes it."""
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().get(pk=evaluation.pk)
        if evaluation.status == Evaluation.Status.SUPERSEDED:
            successor = evaluation.superseded_by
            raise InputError(
                f"this registration was superseded by evaluation #{successor.pk}; change that one"
            )
        current_ablations = [
            {"name": a.name, "categories": a.categories}
            for a in evaluation.arms.filter(kind=EvaluationArm.Kind.ABLATION)
        ]
        registration = _registration(
            context_file=evaluation.context_file, data=data, base=evaluation
        )
        ablations = _ablations(data["ablations"]) if "ablations" in data else current_ablations
        changed, diff = _registration_diff(evaluation, registration, (current_ablations, ablations))
        if not changed:
            return ChangeResult(evaluation, None, [])
        if not evaluation.is_locked:
            _change_in_place(
                evaluation, registration, ablations, changed=changed, diff=diff, actor=actor
            )
            return ChangeResult(evaluation, None, changed)
        successor = _create_evaluation(
            context_file=evaluation.context_file,
            registration=registration,
            ablations=ablations,
            actor=actor,
            supersedes=evaluation,
            supersede_reason=reason.strip()[:2000]
            or f"Registration changed after results existed: {', '.join(changed)}.",
        )
        evaluation.status = Evaluation.Status.SUPERSEDED
        evaluation.save(update_fields=["status"])
        audit_record(
            workspace=evaluation.workspace, actor=actor, action="evaluation.supersede",
            obj=evaluation, data={"superseded_by": successor.pk, "changes": diff},
        )  # fmt: skip
        audit_record(
            workspace=evaluation.workspace, actor=actor, action="evaluation.register",
            obj=successor,
            data={"supersedes": evaluation.pk, "fingerprint": successor.fingerprint,
                  "changes": diff},
        )  # fmt: skip
        return ChangeResult(successor, evaluation, changed)


def _registration_diff(
    evaluation: Evaluation, registration: Registration, ablations: tuple[list, list]
) -> tuple[list[str], dict]:
    """The registration fields (and "ablations") that change, and {field: [before, after]}."""
    current_ablations, new_ablations = ablations
    changed = [
        name
        for name in REGISTRATION_FIELDS
        if registration.values[name] != getattr(evaluation, name)
    ]
    diff = {
        name: [_jsonable(getattr(evaluation, name)), _jsonable(registration.values[name])]
        for name in changed
    }
    if new_ablations != current_ablations:
        changed.append("ablations")
        diff["ablations"] = [current_ablations, new_ablations]
    return changed, diff


def _change_in_place(
    evaluation: Evaluation, registration: Registration, ablations, *, changed, diff, actor
) -> None:
    """Before any result: the registration changes where it is (arms rebuilt if need be)."""
    for name, value in registration.values.items():
        setattr(evaluation, name, value)
    evaluation.fingerprint = _fingerprint(registration.values, ablations)
    evaluation.save()
    if "ablations" in changed or "revision_id" in changed:
        evaluation.arms.all().delete()
        _rebuild_arms(evaluation, ablations)
    audit_record(
        workspace=evaluation.workspace, actor=actor, action="evaluation.update",
        obj=evaluation, data={"changes": diff},
    )  # fmt: skip


def _rebuild_arms(evaluation: Evaluation, ablations: list[dict]) -> None:
    revision = evaluation.revision
    instructions = list(revision.instructions.values_list("category", "text"))
    specs = [
        ("baseline", EvaluationArm.Kind.BASELINE, [], 0),
        ("full", EvaluationArm.Kind.FULL, [], revision.token_estimate),
    ] + [
        (
            a["name"],
            EvaluationArm.Kind.ABLATION,
            a["categories"],
            _arm_tokens(instructions, a["categories"]),
        )
        for a in ablations
    ]
    EvaluationArm.objects.bulk_create(
        EvaluationArm(
            workspace=evaluation.workspace, evaluation=evaluation, name=name, kind=kind,
            categories=categories, token_estimate=tokens, position=position,
        )
        for position, (name, kind, categories, tokens) in enumerate(specs)
    )  # fmt: skip
