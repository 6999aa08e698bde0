"""A call's own cost from telemetry: the `cost_usd` of the `claude_code.api_request` event
for the same request, copied onto `Call.cost_usd`, whichever of the two arrived first."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

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
    from traces.services.telemetry import _linked_calls

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
            links = _linked_calls({(s, r) for _, s, r in pending})
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
