"""The workspace's hook policy: what `context-governance hook …` answers the harness."""

from __future__ import annotations

from django.db import transaction

from governance.errors import InputError
from governance.models import Workspace
from governance.services import audit_record
from traces.models import HookPolicy, PreCompactAction

FIELDS = ("pre_compact_action", "session_start_context", "spec")


def hook_policy_for(*, workspace: Workspace) -> HookPolicy:
    """The workspace's policy, created with the defaults on first use."""
    policy = HookPolicy.objects.filter(workspace=workspace).first()
    if policy is not None:
        return policy
    HookPolicy.objects.bulk_create([HookPolicy(workspace=workspace)], ignore_conflicts=True)
    return HookPolicy.objects.get(workspace=workspace)


def _spec_in(workspace: Workspace, spec_slug: str):
    from specs.selectors import specs_for

    spec = specs_for(workspace=workspace).filter(slug=spec_slug).first()
    if spec is None:
        raise InputError.for_fields(
            {"spec": f"No specification with the key “{spec_slug}” in this workspace."}
        )
    return spec


def hook_policy_update(
    *,
    workspace: Workspace,
    actor,
    pre_compact_action: str,
    session_start_context: bool,
    spec_slug: str = "",
) -> HookPolicy:
    """Change the policy from the next hook on; audited as `hook_policy.update` with what
    changed. `spec_slug` "" means none: the workspace's only authoritative spec, if one."""
    if pre_compact_action not in PreCompactAction.values:
        raise InputError.for_fields(
            {
                "pre_compact_action": f"Must be one of {', '.join(PreCompactAction.values)}, "
                f"not “{pre_compact_action}”."
            }
        )
    spec = _spec_in(workspace, spec_slug) if spec_slug else None
    with transaction.atomic():
        policy = hook_policy_for(workspace=workspace)
        policy = HookPolicy.objects.select_for_update().get(pk=policy.pk)
        before = {
            "pre_compact_action": policy.pre_compact_action,
            "session_start_context": policy.session_start_context,
            "spec": policy.spec.slug if policy.spec else "",
        }
        after = {
            "pre_compact_action": pre_compact_action,
            "session_start_context": bool(session_start_context),
            "spec": spec.slug if spec else "",
        }
        policy.pre_compact_action = pre_compact_action
        policy.session_start_context = bool(session_start_context)
        policy.spec = spec
        policy.updated_by = actor if getattr(actor, "pk", None) else None
        policy.save()
        changed = {
            key: {"from": before[key], "to": after[key]}
            for key in before
            if before[key] != after[key]
        }
        if changed:
            audit_record(
                workspace=workspace,
                actor=actor,
                action="hook_policy.update",
                obj=policy,
                data={"changed": changed},
            )
    return policy
