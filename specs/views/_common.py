"""What the spec pages share: diff category labels, items grouped by kind, safe redirects."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from governance.selectors import workspace_members
from specs.analysis.content import KIND_HEADINGS, KINDS

CATEGORY_LABELS = {
    "resolved": ("Resolved", "An open question was settled or removed."),
    "marked_unresolved": ("Marked unresolved", "A settled item was reopened."),
    "changed": ("Changed", "Same key, different content."),
    "added": ("Added", "New in this version."),
    "omitted": ("Omitted", "Dropped from this version."),
    "retained": ("Retained", "Unchanged."),
}


def grouped_items(items) -> list[dict]:
    """Items (rows or plain data) grouped under their kind's heading, in section order."""
    groups = []
    for kind in KINDS:
        members = [item for item in items if item.kind == kind]
        if members:
            groups.append({"kind": kind, "heading": KIND_HEADINGS[kind], "items": members})
    return groups


def safe_next(value: str, workspace_slug: str) -> str:
    """Only a path inside this workspace: never an open redirect."""
    return value if value.startswith(f"/w/{workspace_slug}/") and "//" not in value else ""


def member_user(workspace, username):
    membership = workspace_members(workspace=workspace).filter(user__username=username).first()
    if membership is None:
        raise PermissionDenied("Not a member of this workspace.")
    return membership.user


def int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
