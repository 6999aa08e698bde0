"""A call's own cost from telemetry: the `cost_usd` of the `claude_code.api_request` event
for the same request, copied onto `Call.cost_usd`, whichever of the two arrived first."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from django.db import connection
from django.db.models import Q

from traces.models import Call, TelemetryEvent

API_REQUEST = "claude_code.api_request"
CHUNK = 500


def calls_telemetry_cost_set(*, costs: dict[int, Decimal]) -> int:
    """Set `cost_usd` of the calls named ({call id: cost}); returns the calls changed."""
    if not costs:
        return 0
    ids = sorted(costs)
    changed = []
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        for pk, stored in Call.objects.filter(pk__in=chunk).values_list("pk", "cost_usd"):
            if stored is None or Decimal(stored) != Decimal(costs[pk]):
                changed.append(Call(pk=pk, cost_usd=costs[pk]))
    Call.objects.bulk_update(changed, ["cost_usd"], batch_size=CHUNK)
    return len(changed)


def calls_telemetry_cost_apply(*, session_ids: Iterable[int]) -> int:
    """Link the sessions' `api_request` events not yet linked to the call with their request
    id (a transcript or span loaded after the event), then give each linked call its event's
    cost (the first event, by id, when a request was reported twice). Returns the calls
    whose cost changed. Sessions without such events cost one indexed query."""
    ids = sorted(set(session_ids))
    changed = 0
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        events = TelemetryEvent.objects.filter(session_id__in=chunk, name=API_REQUEST).exclude(
            request_id=""
        )
        pending = list(
            events.filter(call__isnull=True).values_list("id", "session_id", "request_id")
        )
        if pending:
            links = linked_calls({(s, r) for _, s, r in pending})
            linked = [
                TelemetryEvent(pk=pk, call_id=links[(s, r)])
                for pk, s, r in pending
                if (s, r) in links
            ]
            TelemetryEvent.objects.bulk_update(linked, ["call_id"], batch_size=CHUNK)
        costs: dict[int, Decimal] = {}
        for call_id, cost in (
            events.filter(call__isnull=False, cost_usd__isnull=False)
            .order_by("call_id", "id")
            .values_list("call_id", "cost_usd")
        ):
            costs.setdefault(call_id, cost)
        changed += calls_telemetry_cost_set(costs=costs)
    return changed


def linked_calls(pairs: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(session pk, request id) -> the call of that session with that request id: a
    transcript call's key is `message id:request id`, a Claude Code span's is the id.
    Reads only the calls of the sessions named (through the (session, key) index)."""
    if not pairs:
        return {}
    sessions = sorted({session_pk for session_pk, _ in pairs})
    request_ids = sorted({request_id for _, request_id in pairs})
    found: dict[tuple[int, str], int] = {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, session_id, key FROM traces_call WHERE session_id = ANY(%s) "
                "AND (key = ANY(%s) OR split_part(key, ':', -1) = ANY(%s)) ORDER BY id",
                [sessions, request_ids, request_ids],
            )
            rows = cursor.fetchall()
    else:  # the embedded SQLite default: the same rows, matched on the key's end
        rows = []
        for start in range(0, len(request_ids), 200):  # SQLite caps expression depth at 1,000
            matches = Q()
            for request_id in request_ids[start : start + 200]:
                matches |= Q(key=request_id) | Q(key__endswith=f":{request_id}")
            rows.extend(
                Call.objects.filter(matches, session_id__in=sessions).values_list(
                    "id", "session_id", "key"
                )
            )
        rows.sort()
    for pk, session_pk, key in rows:
        pair = (session_pk, key.rsplit(":", 1)[-1])
        if pair in pairs:
            found.setdefault(pair, pk)
    return found
