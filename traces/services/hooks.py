"""Harness hook events sent by `context-governance hook …`: stored raw with their session id,
event name and times; a PostCompact's summary is also kept on the matching compaction."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from governance.services import audit_record
from specs.services.survival import survival_after_summary
from traces.models import Compaction, Harness, HookEvent, Session

POST_COMPACT = "PostCompact"


@dataclass(frozen=True)
class HookBatchResult:
    received: int
    stored: int
    duplicates: int
    summaries_stored: int


def _summary_compaction(*, session: Session, trigger: str) -> Compaction | None:
    """The session's latest compaction that has no summary yet, of the same trigger if known."""
    compactions = session.compactions.filter(compact_summary="")
    if trigger in ("auto", "manual"):
        compactions = compactions.filter(trigger__in=[trigger, "unknown"])
    return compactions.order_by("-timestamp", "-id").first()


def _fresh_events(*, workspace, events: list[dict]) -> list[dict]:
    """The events not stored before nor repeated earlier in the batch (by `event_id`)."""
    known = set(
        HookEvent.objects.filter(
            workspace=workspace, event_id__in=[e["event_id"] for e in events]
        ).values_list("event_id", flat=True)
    )
    fresh = []
    for event in events:
        if event["event_id"] not in known:
            known.add(event["event_id"])
            fresh.append(event)
    return fresh


def _sessions_of(*, workspace, events: list[dict]) -> dict[tuple[str, str], Session]:
    """The ingested sessions the events name, by (harness, external id)."""
    session_ids = {e["payload"].get("session_id") for e in events} - {None, ""}
    return {
        (s.harness, s.external_id): s
        for s in Session.objects.filter(
            workspace=workspace,
            harness__in=[Harness.CLAUDE_CODE, Harness.CODEX],
            external_id__in=session_ids,
        )
    }


def _summary_store(*, workspace, actor, event: dict, session: Session | None, trigger: str):
    """A PostCompact's summary on the session's latest compaction without one, audited in the
    log; its survival audit is queued to run after the commit. Returns (compaction, stored)."""
    summary = event["payload"].get("compact_summary")
    if event["event"] != POST_COMPACT or session is None or not isinstance(summary, str):
        return None, False
    compaction = _summary_compaction(session=session, trigger=trigger)
    if compaction is None or not summary:
        return compaction, False
    compaction.compact_summary = summary
    compaction.save(update_fields=["compact_summary"])
    audit_record(
        workspace=workspace,
        actor=actor,
        action="compaction.summary_store",
        obj=compaction,
        data={"session": session.external_id, "event_id": event["event_id"]},
    )
    survival_after_summary(compaction=compaction, actor=actor)
    return compaction, True


@transaction.atomic
def hook_events_record(*, workspace, actor, events: list[dict]) -> HookBatchResult:
    """Store validated events once each (by `event_id`); link them to their session when it has
    been ingested, and put a PostCompact's `compact_summary` on the session's latest compaction
    without one. Summaries for compactions not yet ingested stay in the event's payload."""
    fresh = _fresh_events(workspace=workspace, events=events)
    sessions = _sessions_of(workspace=workspace, events=fresh)
    rows, summaries = [], 0
    for event in fresh:
        payload = event["payload"]
        external_id = str(payload.get("session_id") or "")[:200]
        session = sessions.get((event["harness"], external_id))
        trigger = str(payload.get("trigger") or payload.get("source") or "")[:16]
        compaction, stored = _summary_store(
            workspace=workspace, actor=actor, event=event, session=session, trigger=trigger
        )
        summaries += stored
        rows.append(
            HookEvent(
                workspace=workspace,
                event_id=event["event_id"],
                harness=event["harness"],
                event=event["event"],
                session_external_id=external_id,
                session=session,
                compaction=compaction,
                trigger=trigger,
                context_tokens=event.get("context_tokens"),
                payload=payload,
                occurred_at=event["occurred_at"],
                created_by=actor if getattr(actor, "pk", None) else None,
            )
        )
    HookEvent.objects.bulk_create(rows, ignore_conflicts=True)
    return HookBatchResult(
        received=len(events),
        stored=len(rows),
        duplicates=len(events) - len(rows),
        summaries_stored=summaries,
    )
