"""A workspace's artifact policy: size, read and retention limits, and redaction rules."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from artifacts.content.redaction import (
    DEFAULT_RULE_NAMES,
    RedactionPatternError,
    validate_custom_rule,
)
from artifacts.models import ArtifactPolicy
from governance.models import Workspace
from governance.services import InputError, audit_record, full_clean


def artifact_policy_for(*, workspace: Workspace) -> ArtifactPolicy:
    """The workspace's policy, created with the defaults on first use."""
    policy = ArtifactPolicy.objects.filter(workspace=workspace).first()
    if policy is not None:
        return policy
    try:
        with transaction.atomic():
            return ArtifactPolicy.objects.create(workspace=workspace)
    except IntegrityError:
        return ArtifactPolicy.objects.get(workspace=workspace)


POLICY_FIELDS = (
    "retention_days",
    "max_artifact_bytes",
    "max_read_lines",
    "max_read_bytes",
    "max_search_matches",
    "max_search_context",
    "search_timeout_ms",
    "max_content_bytes",
    "disabled_rules",
    "custom_rules",
)


def artifact_policy_update(*, workspace: Workspace, actor, **changes) -> ArtifactPolicy:
    """Change limits, retention or redaction rules; audited with before and after values."""
    unknown = set(changes) - set(POLICY_FIELDS)
    if unknown:
        raise InputError(f"unknown policy fields: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        policy = artifact_policy_for(workspace=workspace)
        policy = ArtifactPolicy.objects.select_for_update().get(pk=policy.pk)
        before = {name: getattr(policy, name) for name in changes}
        for name, value in changes.items():
            setattr(policy, name, value)
        _validate_rules(policy)
        policy.updated_by = actor if getattr(actor, "pk", None) else None
        full_clean(policy, validate_constraints=True)
        policy.save()
        changed = {
            name: {"from": before[name], "to": getattr(policy, name)}
            for name in changes
            if before[name] != getattr(policy, name)
        }
        if changed:
            audit_record(
                workspace=workspace,
                actor=actor,
                action="artifact_policy.update",
                obj=policy,
                data={"changed": changed},
            )
    return policy


def _validate_rules(policy: ArtifactPolicy) -> None:
    disabled = policy.disabled_rules or []
    if not isinstance(disabled, list) or any(name not in DEFAULT_RULE_NAMES for name in disabled):
        raise InputError.for_fields(
            {"disabled_rules": f"name built-in rules only: {', '.join(DEFAULT_RULE_NAMES)}"}
        )
    seen = set()
    for rule in policy.custom_rules or []:
        if not isinstance(rule, dict) or not {"name", "pattern"} <= set(rule):
            raise InputError.for_fields({"custom_rules": "each rule needs a name and a pattern"})
        if rule["name"] in seen:
            raise InputError.for_fields({"custom_rules": f"{rule['name']}: the name is used twice"})
        seen.add(rule["name"])
        try:
            validate_custom_rule(rule["name"], rule["pattern"])
        except RedactionPatternError as exc:
            raise InputError.for_fields({"custom_rules": str(exc)}) from None
