"""Text extracts written after ingest, for instruction visibility (seed 000).

When a transaction that derived sessions commits, a task extracts the stored texts of
those sessions' calls that have no extract yet, or a stale one (`CallTextExtract`), so that
later counts find them stored. That needs a broker: without one the task would run inside
the ingest, so the counting job stores them instead. The task is scoped to the sessions
just derived: a hook send that adds three calls costs three extracts, whatever the
workspace's size. An extract is a cache, so the task keeps no job row: if it is lost, a
request extracts the missing ones in memory and the counting job stores them. A request
never writes them."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

TASK = "analytics.instruction_visibility_extract"


class _ExtractAfterCommit:
    """The commit callback of one transaction and workspace: send the task for the
    sessions it derived."""

    def __init__(self, workspace_id: int):
        self.workspace_id = workspace_id
        self.session_ids: set[int] = set()
        self.sent = False

    def __call__(self) -> None:
        from governance.services import task_named

        self.sent = True
        task_named(TASK).delay(self.workspace_id, sorted(self.session_ids))


def extracts_after_derive(*, workspace_id: int, session_id: int) -> None:
    """The derive step's call for each session it stores: once the transaction commits,
    extract that session's texts (one task per transaction and workspace). Not without a
    broker (`GOVERNANCE_EXTRACT_AFTER_INGEST`): the task would run inside the ingest."""
    if not settings.GOVERNANCE_EXTRACT_AFTER_INGEST:
        return
    connection = transaction.get_connection()
    if connection.in_atomic_block:
        for entry in connection.run_on_commit:
            callback = entry[1]
            if (
                isinstance(callback, _ExtractAfterCommit)
                and callback.workspace_id == workspace_id
                and not callback.sent  # (a test's captured callbacks stay listed once run)
            ):
                callback.session_ids.add(session_id)
                return
    callback = _ExtractAfterCommit(workspace_id)
    callback.session_ids.add(session_id)
    transaction.on_commit(callback)


def extracts_store(*, workspace_id: int, session_ids: list[int] | None = None) -> int:
    """Extract and store every missing or stale extract of these sessions' calls (of the
    whole workspace without `session_ids`); the number written."""
    from traces.analytics.instruction_visibility_matching import extract_missing, stale_call_ids

    return extract_missing(stale_call_ids(workspace_id, session_ids))
