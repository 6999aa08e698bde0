"""Model configurations (pinned by fingerprint) and workloads (their task families)."""

from __future__ import annotations

import hashlib

import orjson
from django.db import transaction

from governance.services import InputError, audit_record, full_clean
from qualification.models import FamilyKind, ModelConfiguration, TaskFamily, Workload
from qualification.services._common import _user

DEFAULT_FAMILIES = [
    ("retrieval", FamilyKind.RETRIEVAL),
    ("aggregation", FamilyKind.AGGREGATION),
    ("retention", FamilyKind.RETENTION),
    ("long_code", FamilyKind.LONG_CODE),
    ("tool_trajectory", FamilyKind.TOOL_TRAJECTORY),
    ("code_change", FamilyKind.CODE_CHANGE),
]


def _fingerprint(data) -> str:
    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


def configuration_fingerprint(pinned: dict) -> str:
    """sha256 of the pinned fields as canonical JSON: any change gives a new fingerprint."""
    return _fingerprint(pinned)


def configuration_get_or_create(
    *,
    workspace,
    model_name: str,
    model_version: str,
    decoding: dict | None = None,
    harness_version: str = "",
    prompt_version: str = "",
    evaluator_version: str = "",
    actor=None,
) -> ModelConfiguration:
    if not model_name.strip() or not model_version.strip():
        raise InputError("model: name and version are both required")
    if decoding is not None and not isinstance(decoding, dict):
        raise InputError('configuration.decoding: must be an object, e.g. {"temperature": 0}')
    pinned = {
        "model_name": model_name.strip(),
        "model_version": model_version.strip(),
        "decoding": decoding or {},
        "harness_version": harness_version.strip(),
        "prompt_version": prompt_version.strip(),
        "evaluator_version": evaluator_version.strip(),
    }
    fingerprint = configuration_fingerprint(pinned)
    existing = ModelConfiguration.objects.filter(
        workspace=workspace, fingerprint=fingerprint
    ).first()
    if existing:
        return existing
    with transaction.atomic():
        config = ModelConfiguration(
            workspace=workspace, fingerprint=fingerprint, created_by=_user(actor), **pinned
        )
        full_clean(config, exclude=["workspace"], validate_constraints=True)
        config.save()
        audit_record(
            workspace=workspace,
            actor=actor,
            action="model_configuration.create",
            obj=config,
            data={"fingerprint": fingerprint, **pinned},
        )
    return config


def _family_specs(families) -> list[tuple[str, str, str]]:
    """[(key, kind, label)] from strings or {key, kind, label} objects, validated."""
    kinds = set(FamilyKind.values)
    specs = []
    for position, item in enumerate(families or []):
        if isinstance(item, str):
            item = {"key": item}
        if not isinstance(item, dict) or not str(item.get("key", "")).strip():
            raise InputError(f'workload.families[{position}]: needs a key, e.g. "retrieval"')
        key = str(item["key"]).strip().lower()
        if not key.replace("_", "").replace("-", "").isalnum() or len(key) > 64:
            raise InputError(
                f"workload.families[{position}]: {key!r} must be a slug (letters, digits, _ or -)"
            )
        kind = str(item.get("kind") or (key if key in kinds else FamilyKind.CUSTOM))
        if kind not in kinds:
            raise InputError(
                f"workload.families[{position}].kind: {kind!r} is not one of {', '.join(sorted(kinds))}"
            )
        specs.append((key, kind, str(item.get("label", ""))[:200]))
    keys = [s[0] for s in specs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise InputError(f"workload.families: {', '.join(duplicates)} listed twice")
    return specs


def workload_get_or_create(
    *, workspace, name: str, version: str, families=None, description: str = "", actor=None
) -> Workload:
    """Find or create a workload version. New workloads default to the six standard families;
    families given for an existing workload are added (never removed)."""
    if not name.strip() or not str(version).strip():
        raise InputError("workload: name and version are both required")
    specs = _family_specs(families) if families else None
    with transaction.atomic():
        workload, created = Workload.objects.get_or_create(
            workspace=workspace,
            name=name.strip(),
            version=str(version).strip(),
            defaults={"description": description},
        )
        if created:
            specs = specs or [(key, kind, "") for key, kind in DEFAULT_FAMILIES]
        existing = set(workload.families.values_list("key", flat=True))
        added = [s for s in specs or [] if s[0] not in existing]
        TaskFamily.objects.bulk_create(
            [
                TaskFamily(workspace=workspace, workload=workload, key=k, kind=kind, label=label)
                for k, kind, label in added
            ]
        )
        if created or added:
            audit_record(
                workspace=workspace,
                actor=actor,
                action="workload.create" if created else "workload.add_families",
                obj=workload,
                data={"families": [s[0] for s in added]},
            )
    return workload
