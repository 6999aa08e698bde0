"""Qualifications: creation with pre-registered analysis, edits before lock, the lock."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from governance.errors import Conflict
from governance.services import InputError, audit_record, full_clean
from qualification.analysis.sweep import AnalysisParams
from qualification.models import Qualification, QualificationStatus
from qualification.services._common import _user
from qualification.services.configurations import (
    configuration_get_or_create,
    workload_get_or_create,
)

MAX_STRATA = 16


def _clean_strata(strata) -> list[int]:
    if strata in (None, ""):
        return []
    if isinstance(strata, str):
        strata = [s.strip() for s in strata.replace(";", ",").split(",") if s.strip()]
    if not isinstance(strata, list | tuple):
        raise InputError("strata: give a list of context sizes in tokens, e.g. [8000, 32000]")
    cleaned = []
    for value in strata:
        text = str(value).strip().lower().replace("_", "")
        multiplier = 1
        if text.endswith("k"):
            text, multiplier = text[:-1], 1000
        try:
            number = float(text) * multiplier
        except ValueError:
            raise InputError(f"strata: {value!r} is not a number of tokens") from None
        if number <= 0 or number != int(number):
            raise InputError(f"strata: {value!r} must be a positive whole number of tokens")
        cleaned.append(int(number))
    if len(set(cleaned)) != len(cleaned):
        raise InputError("strata: each context size may appear only once")
    if len(cleaned) > MAX_STRATA:
        raise InputError(f"strata: at most {MAX_STRATA} strata")
    return sorted(cleaned)


def _validate_analysis(threshold, consequence, overrides) -> AnalysisParams:
    try:
        threshold = float(threshold)
    except (TypeError, ValueError):
        raise InputError("threshold: must be a number between 0 and 1, e.g. 0.85") from None
    if not isinstance(overrides, dict):
        raise InputError("analysis_params: must be an object of parameter overrides")
    try:
        return AnalysisParams.for_qualification(
            threshold=threshold, consequence=consequence, overrides=overrides
        )
    except (ValueError, TypeError) as exc:
        raise InputError(str(exc)) from None


def qualification_create(
    *,
    workspace,
    name: str,
    model: dict,
    configuration: dict | None,
    workload: dict,
    threshold: float,
    consequence: str = "medium",
    strata=None,
    supersedes: Qualification | None = None,
    analysis_params: dict | None = None,
    notes: str = "",
    actor=None,
) -> Qualification:
    """Register a sweep with its pinned configuration and pre-registered θ.

    Naming `supersedes` makes this a requalification: the previous sweep of the same model and
    workload is marked superseded (its curves are kept and overlaid).
    """
    if not name.strip():
        raise InputError("name: required")
    _validate_analysis(threshold, consequence, analysis_params or {})
    configuration = configuration or {}
    unknown = sorted(
        set(configuration) - {"decoding", "harness_version", "prompt_version", "evaluator_version"}
    )
    if unknown:
        raise InputError(
            f"configuration.{unknown[0]}: unknown field; pinned fields are decoding, "
            "harness_version, prompt_version and evaluator_version"
        )
    with transaction.atomic():
        config = configuration_get_or_create(
            workspace=workspace,
            model_name=str(model.get("name", "")),
            model_version=str(model.get("version", "")),
            decoding=configuration.get("decoding"),
            harness_version=str(configuration.get("harness_version", "")),
            prompt_version=str(configuration.get("prompt_version", "")),
            evaluator_version=str(configuration.get("evaluator_version", "")),
            actor=actor,
        )
        work = workload_get_or_create(
            workspace=workspace,
            name=str(workload.get("name", "")),
            version=str(workload.get("version", "")),
            families=workload.get("families"),
            actor=actor,
        )
        previous = None
        if supersedes is not None:
            previous = (
                Qualification.objects.select_for_update()
                .select_related("configuration", "workload")
                .get(pk=supersedes.pk, workspace=workspace)
            )
            if previous.configuration.model_name != config.model_name:
                raise InputError(
                    f"supersedes: #{previous.pk} qualifies {previous.configuration.model_name}, "
                    f"not {config.model_name}"
                )
            if previous.workload.name != work.name:
                raise InputError(
                    f"supersedes: #{previous.pk} runs workload {previous.workload.name}, "
                    f"not {work.name}"
                )
            if hasattr(previous, "superseded_by"):
                raise Conflict(
                    f"#{previous.pk} is already superseded by #{previous.superseded_by.pk}; "
                    "supersede the newest qualification instead"
                )
        qualification = Qualification(
            workspace=workspace,
            name=name.strip(),
            configuration=config,
            workload=work,
            strata=_clean_strata(strata),
            threshold=float(threshold),
            consequence=consequence,
            analysis_params=analysis_params or {},
            supersedes=previous,
            notes=notes,
            created_by=_user(actor),
        )
        full_clean(
            qualification,
            exclude=["workspace", "configuration", "workload", "supersedes"],
            validate_constraints=True,
        )
        qualification.save()
        if previous is not None:
            Qualification.objects.filter(pk=previous.pk).update(
                status=QualificationStatus.SUPERSEDED,
                locked_at=previous.locked_at or timezone.now(),
            )
            audit_record(
                workspace=workspace,
                actor=actor,
                action="qualification.supersede",
                obj=previous,
                data={"superseded_by": qualification.pk},
            )
        audit_record(
            workspace=workspace,
            actor=actor,
            action="qualification.create",
            obj=qualification,
            data={
                "configuration": config.fingerprint,
                "workload": str(work),
                "threshold": qualification.threshold,
                "consequence": consequence,
                "strata": qualification.strata,
                "supersedes": previous.pk if previous else None,
                "analysis_params": qualification.analysis_params,
            },
        )
    return qualification


PRE_REGISTERED = {"threshold", "consequence", "analysis_params", "strata"}


def qualification_update(*, qualification: Qualification, actor, **changes) -> Qualification:
    """Rename or annotate at any time; θ, consequence, strata and parameters only before trials."""
    allowed = {"name", "notes"} | PRE_REGISTERED
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise InputError(f"{unknown[0]}: cannot be changed")
    with transaction.atomic():
        current = Qualification.objects.select_for_update().get(pk=qualification.pk)
        touched = PRE_REGISTERED & set(changes)
        if touched and current.trials.exists():
            raise Conflict(
                f"{', '.join(sorted(touched))} were pre-registered and trials exist; "
                "create a new qualification to change them"
            )
        before = {k: getattr(current, k) for k in changes}
        if "strata" in changes:
            changes["strata"] = _clean_strata(changes["strata"])
        _validate_analysis(
            changes.get("threshold", current.threshold),
            changes.get("consequence", current.consequence),
            changes.get("analysis_params", current.analysis_params),
        )
        for key, value in changes.items():
            setattr(current, key, value)
        full_clean(
            current,
            exclude=["workspace", "configuration", "workload", "supersedes"],
            validate_constraints=True,
        )
        current.save()
        audit_record(
            workspace=current.workspace,
            actor=actor,
            action="qualification.update",
            obj=current,
            data={"before": before, "after": {k: getattr(current, k) for k in changes}},
        )
    return current


def qualification_lock(*, qualification: Qualification, actor) -> Qualification:
    """No more trials: the analysis a limit relies on cannot shift under it."""
    with transaction.atomic():
        updated = Qualification.objects.filter(
            pk=qualification.pk, status=QualificationStatus.COLLECTING
        ).update(status=QualificationStatus.LOCKED, locked_at=timezone.now())
        qualification.refresh_from_db()
        if updated:
            audit_record(
                workspace=qualification.workspace,
                actor=actor,
                action="qualification.lock",
                obj=qualification,
            )
    return qualification
