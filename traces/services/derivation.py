"""The derive step: run now, or queued (debounced) for the sessions OTLP marked."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from governance.models import Workspace
from governance.services import (
    task_named,
    workspace_bump_data_version,
)
from traces.derive import sessions_derive_many
from traces.models import Session
from traces.services._common import (
    _refresh_analytics,
    _relaxed_commits,
)


def sessions_derive(*, session_ids: Iterable[int]) -> None:
    with _relaxed_commits():
        sessions_derive_many(session_ids=session_ids)


DERIVE_DEBOUNCE_SECONDS = 2


def _sessions_mark(ids) -> None:
    """Mark sessions whose new calls have committed as needing the derive step.

    Every row is locked, in id order as the derive step locks them (so the two cannot
    deadlock), even one that reads as marked already: a derive holding it may be about to
    clear the mark without having seen these calls; once it commits, the mark is set
    again."""
    with transaction.atomic():
        locked = Session.objects.filter(pk__in=ids).order_by("pk").select_for_update(no_key=True)
        unmarked = [pk for pk, marked in locked.values_list("pk", "needs_derive") if not marked]
        if unmarked:
            Session.objects.filter(pk__in=unmarked).update(needs_derive=True)


def derive_pending_queue(*, workspace_id: int) -> None:
    """Derive the sessions OTLP touched, at most once per couple of seconds per workspace.

    Spans arrive in many small requests; deriving on each would repeat the same work."""
    from django.core.cache import cache

    if cache.add(f"traces:derive-pending:{workspace_id}", 1, timeout=DERIVE_DEBOUNCE_SECONDS):
        task_named("traces.derive_pending").apply_async(
            args=[workspace_id], countdown=DERIVE_DEBOUNCE_SECONDS
        )


def derive_pending_queue_all() -> list[int]:
    """Queue the derive step of every workspace that has sessions still marked; returns
    their ids. A worker killed mid-derive leaves its sessions marked, and its message comes
    back from the broker only after the visibility timeout: this runs them sooner."""
    workspace_ids = sorted(
        Session.objects.filter(needs_derive=True).values_list("workspace_id", flat=True).distinct()
    )
    for workspace_id in workspace_ids:
        derive_pending_queue(workspace_id=workspace_id)
    return workspace_ids


def derive_pending_run(*, workspace_id: int, limit: int = 2000) -> int:
    """Derive every session marked as needing it; returns how many.

    Releases the debounce lock first, so calls that arrive during this run queue the next one."""
    from django.core.cache import cache

    cache.delete(f"traces:derive-pending:{workspace_id}")
    ids = list(
        Session.objects.filter(workspace_id=workspace_id, needs_derive=True).values_list(
            "id", flat=True
        )[:limit]
    )
    if not ids:
        return 0
    # The derive step clears each mark in the transaction that derives the session.
    sessions_derive_run(workspace_id=workspace_id, session_ids=ids)
    if len(ids) == limit:
        derive_pending_queue(workspace_id=workspace_id)
    return len(ids)


def sessions_derive_run(*, workspace_id: int, session_ids: list[int]) -> None:
    sessions_derive(session_ids=session_ids)
    workspace = Workspace.objects.get(pk=workspace_id)
    workspace_bump_data_version(workspace=workspace)
    _refresh_analytics(workspace)
