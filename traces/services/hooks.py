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


@transaction.atomic
def hook_events_record(*, workspace, actor, events: list[dict]) -> HookBatchResult:
    """Store validated events once each (by `event_id`); link them to their session when it has
    been ingested, and put a PostCompact's `compact_summary` on the session's latest compaction
    without one. Summaries for compactions not yet ingested stay in the event's payload."""
    known = set(
        HookEvent.objects.filter(
            workspace=workspace, event_id__in=[e["event_id"] for e in events]
        ).values_list("event_id", flat=True)
    )
    fresh, seen = [], set()
    for event in events:
        if event["event_id"] in known or event["event_id"] in seen:
            continue
        seen.add(event["event_id"])
        fresh.append(event)
    session_ids = {e["payload"].get("session_id") for e in fresh} - {None, ""}
    sessions = {
        (s.harness, s.external_id): s
        for s in Session.objects.filter(
            workspace=workspace,
            harness__in=[Harness.CLAUDE_CODE, Harness.CODEX],
            external_id__in=session_ids,
        )
    }
    rows, summaries = [], 0
    for event in fresh:
        payload = event["payload"]
        external_id = str(payload.get("session_id") or "")[:200]
        session = sessions.get((event["harness"], external_id))
        trigger = str(payload.get("trigger") or payload.get("source") or "")[:16]
        compaction = None
        summary = payload.get("compact_summary")
        if event["event"] == POST_COMPACT and session is not None and isinstance(summary, str):
            compaction = _summary_compaction(session=session, trigger=trigger)
            if compaction is not None and summary:
                compaction.compact_summary = summary
                compaction.save(update_fields=["compact_summary"])
                summaries += 1
                audit_record(
                    workspace=workspace,
                    actor=actor,
                    action="compaction.summary_store",
                    obj=compaction,
                    data={"session": external_id, "event_id": event["event_id"]},
                )
                survival_after_summary(compaction=compaction, actor=actor)
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
