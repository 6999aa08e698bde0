"""OTLP logs and metrics (Claude Code and Codex telemetry): the workspace's identity
policy, the request stored (redacted) before anything else, then its events and metric
points. A 2xx answer means the request and its rows are committed together."""

from __future__ import annotations

import orjson
from django.db import IntegrityError, connection, transaction

from governance.models import Workspace
from governance.services import InputError, audit_record
from traces.formats.otlp import OtlpDecodeError
from traces.formats.telemetry import (
    CUMULATIVE,
    IDENTITY_KEEP,
    TEMPORALITY_NAMES,
    LogsResult,
    MetricPoint,
    MetricsResult,
    decode,
    decode_logs,
    encoded,
    may_hold_identity,
    normalise_logs,
    normalise_metrics,
    redacted_body,
)
from traces.ingest.joins import HARNESSES, compactions_join, otlp_sessions_adopt
from traces.models import (
    IdentityHandling,
    RawUpload,
    Session,
    TelemetryEvent,
    TelemetryMetricPoint,
    TelemetryPolicy,
    UploadSource,
)
from traces.services.call_costs import API_REQUEST, calls_telemetry_cost_set, linked_calls
from traces.services.derivation import _sessions_mark, derive_pending_queue
from traces.services.uploads import raw_upload_store

INSERT_BATCH = 1000

# --- the identity policy ------------------------------------------------------------------


def telemetry_policy_for(*, workspace: Workspace) -> TelemetryPolicy:
    """The workspace's policy, created with the defaults (hash) on first use."""
    policy = TelemetryPolicy.objects.filter(workspace=workspace).first()
    if policy is not None:
        return policy
    TelemetryPolicy.objects.bulk_create(
        [TelemetryPolicy(workspace=workspace)], ignore_conflicts=True
    )
    return TelemetryPolicy.objects.get(workspace=workspace)


def telemetry_policy_update(*, workspace: Workspace, actor, identity: str) -> TelemetryPolicy:
    """Change what happens to identity attributes from now on; audited. Stored data keeps
    the treatment it was stored with."""
    if identity not in IdentityHandling.values:
        raise InputError(
            f"identity must be one of {', '.join(IdentityHandling.values)}, got {identity!r}"
        )
    with transaction.atomic():
        policy = telemetry_policy_for(workspace=workspace)
        policy = TelemetryPolicy.objects.select_for_update().get(pk=policy.pk)
        before = policy.identity
        policy.identity = identity
        policy.updated_by = actor if getattr(actor, "pk", None) else None
        policy.save()
        if before != identity:
            audit_record(
                workspace=workspace,
                actor=actor,
                action="telemetry_policy.update",
                obj=policy,
                data={"changed": {"identity": {"from": before, "to": identity}}},
            )
    return policy


# --- storing the request ------------------------------------------------------------------


def otlp_body_store(
    *, workspace: Workspace, user, body: bytes, content_type: str, signal: str
) -> tuple[RawUpload, bool, bytes, str, object | None]:
    """Store an OTLP body under the workspace's identity policy, durably.

    Returns (upload, created, stored bytes, their content type, the decoded request or
    None). A body that cannot be decoded is stored only when it cannot hold identity
    attributes (or the policy keeps them); then OtlpDecodeError is raised.
    """
    policy = telemetry_policy_for(workspace=workspace)
    try:
        stored, stored_type, request = redacted_body(
            body, content_type, signal, policy.identity, policy.identity_key
        )
    except OtlpDecodeError:
        if policy.identity != IDENTITY_KEEP and may_hold_identity(body):
            raise
        stored, stored_type, request = body, content_type, None
    upload, created = _body_keep(workspace, user, stored, stored_type, signal)
    return upload, created, stored, stored_type, request


def _body_keep(workspace: Workspace, user, stored: bytes, stored_type: str, signal: str):
    extension = "pb" if "protobuf" in stored_type else "json"
    return raw_upload_store(
        workspace=workspace,
        name=f"otlp-{signal}.{extension}",
        chunks=[stored],
        source=UploadSource.OTLP,
        user=user,
        content_type=stored_type,
    )


def _sessions_for(workspace: Workspace, records: list, created: set | None = None) -> dict:
    """(harness, external id) -> session pk for the records' sessions, creating missing
    ones with the app version and earliest time the records show (so that a session known
    only from telemetry sorts by its time in the sessions list). `created` receives the
    sessions created here that hold nothing yet."""
    wanted = _sessions_wanted(records)
    if not wanted:
        return {}
    external_ids = {external for _, external in wanted}

    def existing():
        return {
            (harness, external): pk
            for harness, external, pk in Session.objects.filter(
                workspace=workspace, external_id__in=external_ids
            ).values_list("harness", "external_id", "id")
            if (harness, external) in wanted
        }

    found = existing()
    missing = [
        Session(workspace=workspace, harness=harness, external_id=external,
                harness_version=wanted[(harness, external)][0][:64],
                started_at=wanted[(harness, external)][1])
        for harness, external in wanted
        if (harness, external) not in found
    ]  # fmt: skip
    if missing:
        Session.objects.bulk_create(missing, ignore_conflicts=True)
        before = set(found.values())
        found = existing()
        fresh = set(found.values()) - before
        fresh -= _otlp_twins_adopt(workspace, found, fresh)  # these hold calls now
        if created is not None:
            created.update(fresh)
    return found


def _sessions_wanted(records: list) -> dict[tuple[str, str], tuple[str, object]]:
    """(harness, external id) -> (app version, earliest time) of the records' sessions."""
    wanted: dict[tuple[str, str], tuple[str, object]] = {}
    for record in records:
        name = (record.harness, record.session_id)
        version = getattr(record, "app_version", "")
        seen = wanted.get(name)
        if seen is None or record.timestamp < seen[1]:
            wanted[name] = (version or (seen[0] if seen else ""), record.timestamp)
    return wanted


def _otlp_twins_adopt(workspace: Workspace, found: dict, fresh: set[int]) -> set[int]:
    """Spans another producer sent for the new harness sessions before they existed move
    in (see `joins.otlp_sessions_adopt`); returns the sessions that received them."""
    adopted = otlp_sessions_adopt(
        named={
            (workspace.pk, external): pk
            for (harness, external), pk in found.items()
            if pk in fresh and harness in HARNESSES
        }
    )
    if adopted:
        _sessions_mark(adopted)
        workspace_id = workspace.pk
        transaction.on_commit(lambda: derive_pending_queue(workspace_id=workspace_id))
    return adopted


# --- logs -----------------------------------------------------------------------------------


def _logs_store(workspace: Workspace, user, body: bytes, content_type: str):
    """(upload, created, events) for a logs body: decoded once (the lean reading of
    `formats.telemetry.wire`) and redacted while read (one pass over the attributes; the
    raw identity is never stored, the re-encoded request is, as `redacted_body` does). A
    body that does not decode is stored if it may be, as for any signal, and then the
    decode error is raised."""
    policy = telemetry_policy_for(workspace=workspace)
    try:
        request = decode_logs(body, content_type)
    except OtlpDecodeError:
        upload, created, stored, stored_type, _ = otlp_body_store(
            workspace=workspace, user=user, body=body, content_type=content_type, signal="logs"
        )
        return upload, created, normalise_logs(decode_logs(stored, stored_type))
    mode = policy.identity if may_hold_identity(body) else IDENTITY_KEEP
    result = normalise_logs(request, mode, policy.identity_key)
    stored, stored_type = encoded(request) if result.redacted else (body, content_type)
    upload, created = _body_keep(workspace, user, stored, stored_type, "logs")
    return upload, created, result


def _event_rows(workspace: Workspace, upload: RawUpload, events: list, sessions, links):
    """EVENT_COLUMNS rows of the events, and {session pk: (context window, compact limit)}."""
    rows = []
    windows = {}
    for e in events:
        session_pk = sessions[(e.harness, e.session_id)]
        if e.context_window is not None or e.auto_compact_token_limit is not None:
            windows[session_pk] = (e.context_window, e.auto_compact_token_limit)
        rows.append((
            workspace.pk, session_pk, upload.pk,
            links.get((session_pk, e.request_id)) if e.request_id else None,
            e.key, e.name, e.recognised, e.timestamp, e.prompt_id, e.request_id,
            e.app_version, e.model, e.query_source, e.agent_name, e.input_tokens,
            e.output_tokens, e.cache_read_tokens, e.cache_creation_tokens,
            e.reasoning_tokens, e.cost_usd, e.duration_ms, e.attributes_json or e.attributes,
        ))  # fmt: skip
    return rows, windows


def _windows_store(windows: dict) -> None:
    for session_pk, (window, limit) in windows.items():
        changes = {}
        if window is not None:
            changes["context_window"] = window
        if limit is not None:
            changes["auto_compact_token_limit"] = limit
        Session.objects.filter(pk=session_pk).update(**changes)


def _linked_costs(rows: list[tuple]) -> dict:
    """{call id: cost} from stored api_request rows linked to a call (the first row of a
    call gives its cost, as in `calls_telemetry_cost_apply`)."""
    costs: dict[int, object] = {}
    for row in rows:
        if row[3] is not None and row[19] is not None and row[5] == API_REQUEST:
            costs.setdefault(row[3], row[19])
    return costs


def otlp_logs_receive(*, workspace: Workspace, user, body: bytes, content_type: str) -> LogsResult:
    """Store the request (redacted), then its events, in one transaction. The same bytes
    sent again add nothing; so does an event already stored (same session, name, time and
    attributes). An api_request event linked to a stored call gives the call its cost."""
    with transaction.atomic():
        upload, created, result = _logs_store(workspace, user, body, content_type)
        if not created:
            return result
        new_sessions: set[int] = set()
        sessions = _sessions_for(workspace, result.events, new_sessions)
        links = linked_calls(
            {
                (session_pk, e.request_id)
                for e in result.events
                if e.request_id
                and e.name == API_REQUEST
                # A session this request created has no calls yet.
                and (session_pk := sessions[(e.harness, e.session_id)]) not in new_sessions
            }
        )
        rows, windows = _event_rows(workspace, upload, result.events, sessions, links)
        fresh = _new_events(rows, new_sessions)
        _write_rows(TelemetryEvent, EVENT_COLUMNS, fresh)
        _compaction_events_join(workspace, fresh)
        calls_telemetry_cost_set(costs=_linked_costs(fresh))
        _windows_store(windows)
        audit_record(
            workspace=workspace,
            actor=user,
            action="telemetry_otlp.receive_logs",
            obj=upload,
            data={
                "bytes": upload.size,
                "records": result.records,
                "events": len(fresh),
                "duplicate_events": len(rows) - len(fresh),
                "unknown_events": result.unknown,
                "skipped_stream_events": result.skipped,
                "rejected_records": len(result.rejected),
                "linked_calls": len(links),
                "sessions": len(sessions),
            },
        )
    return result


def _compaction_events_join(workspace: Workspace, rows: list[tuple]) -> None:
    """The compaction events just stored join the compaction the transcript or a span
    reported (or become one); sessions whose compactions changed are derived again."""
    compacted = {row[1] for row in rows if row[5] == "claude_code.compaction"}
    if not compacted:
        return
    changed = compactions_join(workspace_id=workspace.pk, session_ids=compacted)
    if changed:
        _sessions_mark(changed)
        workspace_id = workspace.pk
        transaction.on_commit(lambda: derive_pending_queue(workspace_id=workspace_id))


EVENT_COLUMNS = (
    "workspace_id", "session_id", "upload_id", "call_id", "key", "name", "recognised",
    "timestamp", "prompt_id", "request_id", "app_version", "model", "query_source",
    "agent_name", "input_tokens", "output_tokens", "cache_read_tokens",
    "cache_creation_tokens", "reasoning_tokens", "cost_usd", "duration_ms", "attributes",
)  # fmt: skip
POINT_COLUMNS = (
    "workspace_id", "session_id", "upload_id", "name", "series_key", "temporality",
    "start_time_unix_nano", "time_unix_nano", "timestamp", "value", "cumulative_value",
    "type", "model", "query_source", "attributes",
)  # fmt: skip


def _write_rows(model, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Insert rows (the last column is a JSON dict): COPY on PostgreSQL; if a concurrent
    request stored one of the same keys first, an insert that skips the stored keys."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        from psycopg.errors import UniqueViolation

        try:
            with transaction.atomic(), connection.cursor() as cursor:
                copy_sql = f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN"
                with cursor.cursor.copy(copy_sql) as copy:
                    for row in rows:
                        document = row[-1]
                        document = (
                            document if type(document) is bytes else orjson.dumps(document)
                        ).decode()
                        if "\\u0000" in document:
                            # jsonb refuses NUL characters, which a string attribute may hold.
                            document = document.replace("\\u0000", "")
                        copy.write_row((*row[:-1], document))
            return
        except (IntegrityError, UniqueViolation):  # the raw COPY raises psycopg's own error
            pass
    objects = [
        model(**dict(zip(columns, (*row[:-1], _document(row[-1])), strict=True))) for row in rows
    ]
    for start in range(0, len(objects), INSERT_BATCH):
        model.objects.bulk_create(objects[start : start + INSERT_BATCH], ignore_conflicts=True)


def _document(value):
    return orjson.loads(value) if type(value) is bytes else value


def _new_events(rows: list[tuple], new_sessions: set[int] = frozenset()) -> list[tuple]:
    """The rows whose (session, key) is not stored yet, nor repeated earlier in the batch.
    A session this request created has nothing stored: its rows are not looked up."""
    known = [row for row in rows if row[1] not in new_sessions]
    stored = _stored_keys(known)
    fresh = []
    for row in rows:
        if (row[1], row[4]) not in stored:
            stored.add((row[1], row[4]))
            fresh.append(row)
    return fresh


def _stored_keys(rows: list[tuple]) -> set[tuple[int, str]]:
    if not rows:
        return set()
    if connection.vendor == "postgresql":
        # One statement through the (session, key) index, without compiling a long IN list.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT e.session_id, e.key FROM traces_telemetryevent e "
                "JOIN unnest(%s::bigint[], %s::text[]) AS w(session_id, key) "
                "ON e.session_id = w.session_id AND e.key = w.key",
                [[row[1] for row in rows], [row[4] for row in rows]],
            )
            return set(cursor.fetchall())
    return set(
        TelemetryEvent.objects.filter(
            session_id__in={row[1] for row in rows}, key__in={row[4] for row in rows}
        ).values_list("session_id", "key")
    )


# --- metrics --------------------------------------------------------------------------------


def _last_points(workspace: Workspace, series: set[str]) -> dict[str, tuple]:
    """series key -> (time, start, cumulative value, temporality) of its latest stored point."""
    if not series:
        return {}
    rows = TelemetryMetricPoint.objects.filter(workspace=workspace, series_key__in=series).order_by(
        "series_key", "-time_unix_nano"
    )
    if connection.vendor == "postgresql":
        rows = rows.distinct("series_key")
    columns = (
        "series_key", "time_unix_nano", "start_time_unix_nano", "cumulative_value", "temporality",
    )  # fmt: skip
    latest: dict[str, tuple] = {}
    for row in rows.values_list(*columns):  # newest first within each series
        latest.setdefault(row[0], row[1:])
    return latest


def _stored_times(workspace: Workspace, points: list[MetricPoint]) -> set[tuple[str, int]]:
    if not points:
        return set()
    series = {p.series_key for p in points}
    times = {p.time_ns for p in points}
    return set(
        TelemetryMetricPoint.objects.filter(
            workspace=workspace, series_key__in=series, time_unix_nano__in=times
        ).values_list("series_key", "time_unix_nano")
    )


def otlp_metrics_receive(
    *, workspace: Workspace, user, body: bytes, content_type: str
) -> MetricsResult:
    """Store the request (redacted), then its Sum data points as deltas, in one transaction.

    A cumulative point becomes its increase over the previous point of its series (same
    start time); a new start time is a reset, so the point's value is the increase. A
    series keeps the temporality it was first sent with; a point sent with the other, or
    a monotonic cumulative point below its predecessor, is rejected with the reason."""
    with transaction.atomic():
        upload, created, stored, stored_type, request = otlp_body_store(
            workspace=workspace, user=user, body=body, content_type=content_type, signal="metrics"
        )
        result = normalise_metrics(
            request if request is not None else decode(stored, stored_type, "metrics")
        )
        if not created:
            return result
        _series_lock(result.points)
        accepted, duplicates = _points_accept(workspace, result)
        sessions = _sessions_for(workspace, [p for p, _, _ in accepted if p.session_id])
        rows = _point_rows(workspace, upload, accepted, sessions)
        _write_rows(TelemetryMetricPoint, POINT_COLUMNS, rows)
        audit_record(
            workspace=workspace,
            actor=user,
            action="telemetry_otlp.receive_metrics",
            obj=upload,
            data={
                "bytes": upload.size,
                "data_points": result.data_points,
                "stored_points": len(rows),
                "duplicate_points": duplicates,
                "ignored_points": result.ignored_points,
                "rejected_points": len(result.rejected),
                "sessions": len(sessions),
            },
        )
    return result


def _series_lock(points: list[MetricPoint]) -> None:
    """One writer per series at a time: the previous point read next stays the previous."""
    if connection.vendor != "postgresql" or not points:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            # The keys in one order for every request (unnest keeps the sorted list's
            # order): two requests cannot wait on each other.
            "SELECT pg_advisory_xact_lock(hashtext(k)) FROM unnest(%s::text[]) AS k",
            [sorted({p.series_key for p in points})],
        )


def _points_accept(workspace: Workspace, result: MetricsResult):
    """([(point, delta, cumulative value or None)], duplicates) of the request's points in
    series and time order; the rejected ones are added to `result.rejected`."""
    stored_pairs = _stored_times(workspace, result.points)
    last = _last_points(workspace, {p.series_key for p in result.points})
    accepted: list[tuple[MetricPoint, float, float | None]] = []
    duplicates = 0
    for point in sorted(result.points, key=lambda p: (p.series_key, p.time_ns)):
        previous = last.get(point.series_key)
        if (point.series_key, point.time_ns) in stored_pairs or (
            previous is not None and previous[0] == point.time_ns  # repeated in the request
        ):
            duplicates += 1
            continue
        verdict = _point_delta(point, previous)
        if isinstance(verdict, str):
            result.rejected.append((point.path, f"{point.name}: {verdict}"))
            continue
        accepted.append((point, *verdict))
        last[point.series_key] = (
            point.time_ns, point.start_ns, point.value, TEMPORALITY_NAMES[point.temporality],
        )  # fmt: skip
    return accepted, duplicates


def _point_delta(point: MetricPoint, previous: tuple | None):
    """(delta, cumulative value or None) of a point after `previous` (time, start,
    cumulative value, temporality) of its series, or the reason it is rejected."""
    kind = TEMPORALITY_NAMES[point.temporality]
    if previous is not None and previous[3] != kind:
        return f"this series was sent as {previous[3]}, this point is {kind}"
    if point.temporality != CUMULATIVE:
        return point.value, None
    if previous is not None and point.time_ns < previous[0]:
        return "cumulative point is older than the last stored point of its series"
    same_start = previous is not None and previous[1] == point.start_ns
    delta = point.value - previous[2] if same_start else point.value
    if delta < 0 and point.monotonic:
        return (
            f"cumulative value fell from {previous[2]:g} to {point.value:g} with the same "
            "start time"
        )
    return delta, point.value


def _point_rows(workspace: Workspace, upload: RawUpload, accepted: list, sessions: dict):
    """POINT_COLUMNS rows of the accepted points."""
    return [
        (workspace.pk, sessions.get((p.harness, p.session_id)) if p.session_id else None,
         upload.pk, p.name, p.series_key, TEMPORALITY_NAMES[p.temporality], p.start_ns,
         p.time_ns, p.timestamp, delta, cumulative, p.type, p.model, p.query_source,
         p.attributes)
        for p, delta, cumulative in accepted
    ]  # fmt: skip
