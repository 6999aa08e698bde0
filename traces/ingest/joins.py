"""One call, many sources: a transcript line, an OTLP span and a `claude_code.api_request`
event for the same request become one Call, and the compactions every source reports one
Compaction, whatever order they arrive in.

The ids that join them: a Claude Code transcript call's key is `message.id:requestId`
(Codex: `response:thread:response_id`); a span's is its `gen_ai.response.id` (the request
id for Claude Code's own spans, the message id for GenAI instrumentations); an event
carries `request_id`. An id matches a call key that equals it, starts with `id:` or ends
with `:id`, within the session.

Spans from other producers (not Claude Code's or Codex's own instrumentation) name their
session by `gen_ai.conversation.id`; when that is a Claude Code session id or a Codex
conversation id, they belong to that harness session: a span arriving after the session
exists is loaded into it (`harness_sessions_named`), and an `otlp` session the spans made
before the harness session existed is moved into it when it appears
(`otlp_sessions_adopt`). Then the call joins below apply as within any session.

Every function here works on a whole batch with a fixed number of statements (the move
of an `otlp` session, once in its life, a fixed number per session).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Q, Value, When

from traces.models import (
    Agent,
    Call,
    CallSource,
    CallText,
    Compaction,
    FileTouch,
    HookEvent,
    OperatorPrompt,
    Run,
    Session,
    TelemetryEvent,
)

CHUNK = 500  # ids per IN list (SQLite caps the variables of a statement)
COMPACTION_WINDOW = timedelta(seconds=120)
PRE_TOKENS_TOLERANCE = 0.15  # the event's pre_tokens are approximate
MIN_ID_LENGTH = 8  # shorter key parts (a line number, "uuid") are not ids
# The parsers' key prefixes: words, not ids.
KEY_PREFIXES = frozenset({"response", "uuid", "line", "span", "boundary", "summary", "compacted"})


def key_ids(key: str) -> set[str]:
    """The ids other sources may name a call by: the first and last `:` parts of its key."""
    parts = key.split(":")
    if len(parts) < 2:
        return set()
    return {
        part
        for part in (parts[0], parts[-1])
        if len(part) >= MIN_ID_LENGTH and part not in KEY_PREFIXES
    }


def _chunks(items: list, size: int = CHUNK):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _case(mapping: dict[int, int], field: str):
    return Case(*[When(**{field: old}, then=Value(new)) for old, new in mapping.items()])


# --- calls -------------------------------------------------------------------------------


def calls_matching(
    pairs: set[tuple[int, str]], *, transcript_only: bool = False
) -> dict[tuple[int, str], int]:
    """(session pk, id) -> the call of that session the id names (see the module doc).
    With `transcript_only`, only calls read from a transcript (a `source_line`)."""
    if not pairs:
        return {}
    sessions = sorted({session_pk for session_pk, _ in pairs})
    ids = sorted({ident for _, ident in pairs})
    rows = []
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, session_id, key FROM traces_call WHERE session_id = ANY(%s) "
                "AND (key = ANY(%s) OR split_part(key, ':', -1) = ANY(%s) "
                "OR split_part(key, ':', 1) = ANY(%s)) "
                "AND (source_line IS NOT NULL OR NOT %s) ORDER BY id",
                [sessions, ids, ids, ids, transcript_only],
            )
            rows = cursor.fetchall()
    else:  # SQLite: the same rows, matched on the key's ends
        for chunk in _chunks(ids, 200):  # SQLite caps expression depth at 1,000
            matches = Q()
            for ident in chunk:
                matches |= Q(key=ident) | Q(key__endswith=f":{ident}")
                matches |= Q(key__startswith=f"{ident}:")
            calls = Call.objects.filter(matches, session_id__in=sessions)
            if transcript_only:
                calls = calls.filter(source_line__isnull=False)
            rows.extend(calls.values_list("id", "session_id", "key"))
        rows.sort()
    found: dict[tuple[int, str], int] = {}
    for pk, session_pk, key in rows:
        for ident in {key} | key_ids(key) | {key.split(":")[0], key.split(":")[-1]}:
            if (session_pk, ident) in pairs:
                found.setdefault((session_pk, ident), pk)
    return found


def _columns(by_id: dict[tuple[int, str], int]) -> list[list]:
    pairs = sorted(by_id.items())
    return [[s for (s, _), _ in pairs], [i for (_, i), _ in pairs], [c for _, c in pairs]]


def events_link(by_id: dict[tuple[int, str], int]) -> int:
    """Link the events not linked yet whose (session, request id) names a call; returns
    how many were linked."""
    if not by_id:
        return 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE traces_telemetryevent e SET call_id = v.call_id "
                "FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) AS v(session_id, ident, "
                "call_id) WHERE e.session_id = v.session_id AND e.request_id = v.ident "
                "AND e.request_id <> '' AND e.call_id IS NULL",
                _columns(by_id),
            )
            return cursor.rowcount
    sessions = sorted({session_pk for session_pk, _ in by_id})
    ids = sorted({ident for _, ident in by_id})
    links: dict[int, int] = {}
    for chunk in _chunks(ids):
        for pk, session_pk, request_id in TelemetryEvent.objects.filter(
            session_id__in=sessions, call__isnull=True, request_id__in=chunk
        ).values_list("id", "session_id", "request_id"):
            call_pk = by_id.get((session_pk, request_id))
            if call_pk is not None:
                links[pk] = call_pk
    for chunk in _chunks(sorted(links)):
        TelemetryEvent.objects.filter(pk__in=chunk).update(
            call_id=_case({pk: links[pk] for pk in chunk}, "pk")
        )
    return len(links)


def transcript_calls_join(written: dict[tuple[int, str], int]) -> set[int]:
    """Transcript calls just written ((session, key) -> id): the span-only calls of the
    same response fold into them (their span rows and event links move over, the span's
    Call goes), and events waiting for them are linked. Returns the sessions whose calls
    changed (their positions and totals need the derive step). Spans another producer sent
    for the session before it existed are moved into it first (`otlp_sessions_adopt`)."""
    adopted = otlp_sessions_adopt(session_ids={session_pk for session_pk, _ in written})
    return adopted | _transcript_calls_fold(written)


def _transcript_calls_fold(written: dict[tuple[int, str], int]) -> set[int]:
    by_id: dict[tuple[int, str], int] = {}
    for (session_pk, key), pk in written.items():
        for ident in key_ids(key):
            by_id.setdefault((session_pk, ident), pk)
    if not by_id:
        return set()
    sessions = sorted({session_pk for session_pk, _ in by_id})
    ids = sorted({ident for _, ident in by_id})
    merges: dict[int, int] = {}  # span-only call -> transcript call
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.id, v.call_id FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) "
                "AS v(session_id, ident, call_id) JOIN traces_call c ON "
                "c.session_id = v.session_id AND c.key = v.ident "
                "WHERE c.source_line IS NULL AND c.id <> v.call_id",
                _columns(by_id),
            )
            merges = dict(cursor.fetchall())
        ids = []
    for chunk in _chunks(ids):
        for pk, session_pk, key in Call.objects.filter(
            session_id__in=sessions, key__in=chunk, source_line__isnull=True
        ).values_list("id", "session_id", "key"):
            target = by_id.get((session_pk, key))
            if target is not None and target != pk:
                merges[pk] = target
    changed: set[int] = set()
    if merges:
        calls_fold(merges)
        changed = set(
            Call.objects.filter(pk__in=list(merges.values())).values_list("session_id", flat=True)
        )
    events_link(by_id)
    return changed


def calls_fold(merges: dict[int, int]) -> None:
    """Fold calls into others of the same session (old pk -> new pk): their span rows and
    event links move over; the folded calls and their text go."""
    for chunk in _chunks(sorted(merges)):
        mapping = {pk: merges[pk] for pk in chunk}
        CallSource.objects.filter(call_id__in=chunk).update(call_id=_case(mapping, "call_id"))
        TelemetryEvent.objects.filter(call_id__in=chunk).update(call_id=_case(mapping, "call_id"))
        OperatorPrompt.objects.filter(call_id__in=chunk).delete()
        CallText.objects.filter(call_id__in=chunk).delete()
        Call.objects.filter(pk__in=chunk)._raw_delete(Call.objects.db)


# --- sessions named by other producers' spans ------------------------------------------

HARNESSES = ("claude-code", "codex")
OTLP_HARNESS = "otlp"


def harness_sessions_named(*, workspace_id: int, external_ids) -> dict[str, tuple[str, int]]:
    """external id -> (harness, pk) of the Claude Code or Codex session with that id."""
    ids = sorted(set(external_ids))
    found: dict[str, tuple[str, int]] = {}
    for chunk in _chunks(ids):
        for harness, external, pk in (
            Session.objects.filter(
                workspace_id=workspace_id, harness__in=HARNESSES, external_id__in=chunk
            )
            .order_by("id")
            .values_list("harness", "external_id", "id")
        ):
            found.setdefault(external, (harness, pk))
    return found


def otlp_sessions_adopt(*, session_ids=(), named: dict | None = None) -> set[int]:
    """Move into each Claude Code or Codex session named the `otlp` session of the same
    workspace and external id (spans another producer sent before the harness session
    existed), then delete it. The sessions come as ids, or as `named` {(workspace id,
    external id): pk of a harness session} when the caller knows them. Returns the harness
    sessions that received something (their derived rows need the derive step). One or
    two statements when there is nothing to move."""
    named = dict(named or {})
    for chunk in _chunks(sorted(set(session_ids))):
        for pk, workspace_id, external in Session.objects.filter(
            pk__in=chunk, harness__in=HARNESSES
        ).values_list("id", "workspace_id", "external_id"):
            named.setdefault((workspace_id, external), pk)
    if not named:
        return set()
    twins: dict[int, int] = {}  # otlp session -> harness session
    for chunk in _chunks(sorted({external for _, external in named})):
        for pk, workspace_id, external in Session.objects.filter(
            workspace_id__in={workspace_id for workspace_id, _ in named},
            harness=OTLP_HARNESS,
            external_id__in=chunk,
        ).values_list("id", "workspace_id", "external_id"):
            if (workspace_id, external) in named:
                twins[pk] = named[(workspace_id, external)]
    for source, target in sorted(twins.items()):
        with transaction.atomic():
            _session_move(source, target)
    return set(twins.values())


def _session_move(source: int, target: int) -> None:
    """Everything of session `source` into session `target`, then `source` deleted. Agents
    with the same id become one; calls with the same key fold into the target's; derived
    rows (runs, file touches) go, the derive step makes them again."""
    Run.objects.filter(session_id=source).delete()
    FileTouch.objects.filter(session_id=source).delete()
    theirs = dict(Agent.objects.filter(session_id=target).values_list("external_id", "id"))
    same = {
        pk: theirs[external]
        for pk, external in Agent.objects.filter(session_id=source).values_list("id", "external_id")
        if external in theirs
    }
    if same:
        for relation in Agent._meta.related_objects:
            if relation.one_to_many:
                name = relation.field.name
                relation.related_model.objects.filter(**{f"{name}__in": list(same)}).update(
                    **{name: _case(same, name)}
                )
        Agent.objects.filter(pk__in=list(same)).delete()
    keys = dict(Call.objects.filter(session_id=target).values_list("key", "id"))
    folds = {
        pk: keys[key]
        for pk, key in Call.objects.filter(session_id=source).values_list("id", "key")
        if key in keys
    }
    if folds:
        calls_fold(folds)
    for relation in Session._meta.related_objects:
        if not relation.one_to_many:
            continue
        rows = relation.related_model.objects.filter(**{relation.field.name: source})
        try:
            with transaction.atomic():
                rows.update(**{relation.field.name: target})
        except IntegrityError:
            rows.delete()  # the target has the same row already (the same key)
    Session.objects.filter(pk=source).delete()


# --- compactions -------------------------------------------------------------------------


def compaction_source(key: str) -> str:
    if key.startswith("event:"):
        return "event"
    if key.startswith("span:"):
        return "span"
    return "transcript"


def _truthy(value) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _int_or_none(value) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if 0 <= number < 2**62 else None


def _same_compaction(anchor: Compaction, timestamp, trigger: str, pre_tokens) -> bool:
    if anchor.timestamp is None or timestamp is None:
        return False
    if abs(anchor.timestamp - timestamp) > COMPACTION_WINDOW:
        return False
    if "unknown" not in (anchor.trigger, trigger) and anchor.trigger != trigger:
        return False
    if not (anchor.pre_tokens and pre_tokens):
        return True
    return abs(anchor.pre_tokens - pre_tokens) <= PRE_TOKENS_TOLERANCE * max(
        anchor.pre_tokens, pre_tokens
    )


def _nearest(anchors: list[Compaction], used: set[int], timestamp, trigger, pre_tokens):
    fits = [
        a
        for a in anchors
        if a.pk not in used and _same_compaction(a, timestamp, trigger, pre_tokens)
    ]
    return min(fits, key=lambda a: abs(a.timestamp - timestamp), default=None)


def _add_source(compaction: Compaction, source: str) -> None:
    names = set((compaction.sources or compaction_source(compaction.key)).split())
    names |= {compaction_source(compaction.key), source}
    compaction.sources = " ".join(sorted(names))


@dataclass
class _Plan:
    folded: dict[int, int] = field(default_factory=dict)  # compaction -> the one it folds into
    dirty: dict[int, Compaction] = field(default_factory=dict)
    created: list[Compaction] = field(default_factory=list)
    changed_sessions: set[int] = field(default_factory=set)


def _event_fields(event: TelemetryEvent) -> dict:
    attrs = event.attributes or {}
    trigger = str(attrs.get("trigger") or "unknown")
    return {
        "trigger": trigger if trigger in ("auto", "manual") else "unknown",
        "pre_tokens": _int_or_none(attrs.get("pre_tokens")),
        "post_tokens": _int_or_none(attrs.get("post_tokens")),
        "success": _truthy(attrs.get("success")),
        "error": str(attrs.get("error") or "")[:10_000],
    }


def _fold_spans(transcript: list[Compaction], spans: list[Compaction], plan: _Plan) -> list:
    """Span compactions fold into the transcript's; returns what events may join: the
    transcript's compactions and the spans no transcript compaction took."""
    anchors = list(transcript)
    used: set[int] = set()
    for span in spans:
        match = _nearest(transcript, used, span.timestamp, span.trigger, span.pre_tokens)
        if match is None:
            anchors.append(span)
            continue
        used.add(match.pk)
        plan.folded[span.pk] = match.pk
        before = match.sources
        _add_source(match, "span")
        if match.sources != before:
            plan.dirty[match.pk] = match
    return anchors


def _join_event(event, anchors, used, mine, plan: _Plan, workspace_id: int) -> None:
    """One compaction event: onto the compaction it matches (folding in the compaction
    made of it alone, if any), else a compaction of its own."""
    fields = _event_fields(event)
    match = _nearest(anchors, used, event.timestamp, fields["trigger"], fields["pre_tokens"])
    if match is None:
        if mine is None:
            agent = Agent.objects.get_or_create(
                workspace_id=workspace_id, session_id=event.session_id, external_id="main"
            )[0]
            plan.created.append(
                Compaction(
                    workspace_id=workspace_id, session_id=event.session_id, agent=agent,
                    key=f"event:{event.key}", timestamp=event.timestamp,
                    duration_ms=event.duration_ms, sources="event", **fields,
                )
            )  # fmt: skip
            plan.changed_sessions.add(event.session_id)
        return
    used.add(match.pk)
    if mine is not None:
        plan.folded[mine.pk] = match.pk
    before = (match.duration_ms, match.success, match.error, match.sources)
    if match.duration_ms is None:
        match.duration_ms = event.duration_ms
    match.success, match.error = fields["success"], fields["error"]
    _add_source(match, "event")
    if (match.duration_ms, match.success, match.error, match.sources) != before:
        plan.dirty[match.pk] = match


def _apply(plan: _Plan) -> None:
    for chunk in _chunks(sorted(plan.folded)):
        mapping = {pk: plan.folded[pk] for pk in chunk}
        HookEvent.objects.filter(compaction_id__in=chunk).update(
            compaction_id=_case(mapping, "compaction_id")
        )
        Compaction.objects.filter(pk__in=chunk).delete()
    survivors = [c for pk, c in plan.dirty.items() if pk not in plan.folded]
    if survivors:
        Compaction.objects.bulk_update(
            survivors, ["duration_ms", "success", "error", "sources"], batch_size=CHUNK
        )
    if plan.created:
        Compaction.objects.bulk_create(plan.created, ignore_conflicts=True)


def compactions_join(*, workspace_id: int, session_ids) -> set[int]:
    """Make the compactions of these sessions one per event: a span's or an event's
    compaction within COMPACTION_WINDOW of a transcript's, with the same trigger (or an
    unknown one) and pre_tokens within 15 %, folds into it; the `claude_code.compaction`
    event adds its duration, success and error. An event no other source has yet becomes
    a compaction of its own (key `event:<event key>`), folded in when the transcript
    arrives. Running it again changes nothing. Returns the sessions whose compactions
    were added or removed."""
    session_ids = sorted(set(session_ids))
    events = list(
        TelemetryEvent.objects.filter(
            session_id__in=session_ids, name="claude_code.compaction"
        ).order_by("timestamp", "id")
    )
    compactions = list(
        Compaction.objects.filter(session_id__in=session_ids, kind="full").order_by(
            "timestamp", "id"
        )
    )
    if not events and all(compaction_source(c.key) == "transcript" for c in compactions):
        return set()
    plan = _Plan()
    for session_pk in session_ids:
        own = [c for c in compactions if c.session_id == session_pk]
        kinds = {"transcript": [], "span": [], "event": []}
        for compaction in own:
            kinds[compaction_source(compaction.key)].append(compaction)
        anchors = _fold_spans(kinds["transcript"], kinds["span"], plan)
        from_events = {c.key: c for c in kinds["event"]}
        used: set[int] = set()
        for event in events:
            if event.session_id == session_pk:
                mine = from_events.get(f"event:{event.key}")
                _join_event(event, anchors, used, mine, plan, workspace_id)
        if any(c.pk in plan.folded for c in own):
            plan.changed_sessions.add(session_pk)
    _apply(plan)
    return plan.changed_sessions
