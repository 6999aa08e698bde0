"""Reads for analytics: columns as numpy arrays (never model instances), and cached results.

On PostgreSQL the columns stream through `COPY (SELECT …) TO STDOUT` into pandas' C
reader; elsewhere through a plain cursor.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import orjson
import pandas as pd
from django.db import connection
from django.db.models import F, FloatField, QuerySet
from django.db.models.expressions import RawSQL

from governance.models import Job, JobStatus, Workspace
from traces.analysis.compactions import CompactionColumns
from traces.analysis.costs import CallColumns
from traces.analysis.coverage import TouchColumns
from traces.analysis.incidents import AgentRow
from traces.analytics.models import AnalyticsResult
from traces.filters import text_contains
from traces.models import Call, Session

JOB_KIND = "trace_analytics"
FILTER_FIELDS = ("started_after", "started_before", "harness", "model", "project", "task_type")
PARAMETER_DEFAULTS = {"band": 25_000, "upper_from": 150_000, "fork_bound": 100_000, "window": 25}


@dataclass(frozen=True)
class AnalyticsFilters:
    started_after: str = ""  # YYYY-MM-DD, on the call's date
    started_before: str = ""
    harness: str = ""
    model: str = ""
    project: str = ""
    task_type: str = ""
    band: int = PARAMETER_DEFAULTS["band"]
    upper_from: int = PARAMETER_DEFAULTS["upper_from"]
    fork_bound: int = PARAMETER_DEFAULTS["fork_bound"]
    window: int = PARAMETER_DEFAULTS["window"]

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    @property
    def key(self) -> str:
        return hashlib.sha256(orjson.dumps(self.as_dict(), option=orjson.OPT_SORT_KEYS)).hexdigest()

    def describe(self) -> str:
        parts = [
            f"{name.replace('_', ' ')} = {value}"
            for name in FILTER_FIELDS
            if (value := getattr(self, name))
        ]
        return "; ".join(parts) if parts else "all traces"


def _day(value: str) -> datetime:
    """The start of a YYYY-MM-DD date in UTC."""
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def selected_calls(workspace: Workspace, filters: AnalyticsFilters) -> QuerySet[Call]:
    """The calls the filters select; model and project match as on the sessions list
    (`traces.filters.text_contains`), dates are the call's UTC date."""
    calls = Call.objects.filter(workspace=workspace)
    if filters.started_after:
        calls = calls.filter(timestamp__gte=_day(filters.started_after))
    if filters.started_before:
        calls = calls.filter(timestamp__lt=_day(filters.started_before) + timedelta(days=1))
    if filters.model:
        calls = calls.filter(text_contains("model", filters.model))
    if filters.harness or filters.project:
        sessions = Session.objects.filter(workspace=workspace)
        if filters.harness:
            sessions = sessions.filter(harness=filters.harness)
        if filters.project:
            sessions = sessions.filter(text_contains("project", filters.project))
        calls = calls.filter(session_id__in=sessions.values("id"))
    return calls.order_by()


def _frame(sql: str, params: list, columns: list[str]) -> pd.DataFrame:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            query = cursor.cursor.mogrify(sql, params)
            buffer = io.BytesIO()
            with cursor.cursor.copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv)") as copy:
                for chunk in copy:
                    buffer.write(chunk)
        buffer.seek(0)
        if buffer.getbuffer().nbytes == 0:
            return pd.DataFrame(columns=columns)
        return pd.read_csv(buffer, header=None, names=columns, keep_default_na=True)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return pd.DataFrame(rows, columns=columns)


@dataclass
class AnalyticsData:
    calls: CallColumns
    call_session: np.ndarray
    call_task_type: np.ndarray
    agents: dict[int, AgentRow]
    compactions: CompactionColumns
    touches: TouchColumns


def _epoch_sql(column: str) -> str:
    if connection.vendor == "postgresql":
        return f"extract(epoch from {column})"
    return f"(julianday({column}) - 2440587.5) * 86400.0"


def load(workspace: Workspace, filters: AnalyticsFilters) -> AnalyticsData:
    columns = selected_calls(workspace, filters).values_list(
        "agent_id",
        "agent_index",
        "session_index",
        "session_id",
        "context_tokens",
        F("input_tokens")
        + F("cache_creation_tokens")
        + F("cache_read_tokens")
        + F("output_tokens"),
        "output_tokens",
        # A constant per database vendor, with no input in it.
        RawSQL(_epoch_sql('"traces_call"."timestamp"'), [], output_field=FloatField()),  # noqa: S611
    )
    calls = _frame(
        *columns.query.sql_with_params(),
        [
            "agent",
            "position",
            "session_index",
            "session",
            "context",
            "billed",
            "output",
            "timestamp",
        ],
    ).sort_values(["agent", "position"], kind="stable")
    runs = _frame(
        'SELECT r.id, r.agent_id, r.first_call_index, r.last_call_index, r.task_type, r.started_by_id, r."index" '
        "FROM traces_run r WHERE r.workspace_id = %s",
        [workspace.pk],
        ["id", "agent", "first", "last", "task_type", "started_by", "index"],
    )
    agent_ids = calls["agent"].to_numpy(dtype=np.int64)
    session_positions = calls["session_index"].to_numpy(dtype=np.int64)
    run_ids, task_types = _runs_for_calls(agent_ids, session_positions, runs)
    keep = np.ones(len(calls), dtype=bool)
    if filters.task_type:
        keep = task_types == filters.task_type
    columns = CallColumns(
        agent=agent_ids[keep],
        run=run_ids[keep],
        context=calls["context"].to_numpy(dtype=np.int64)[keep],
        billed=calls["billed"].to_numpy(dtype=np.int64)[keep],
        output=calls["output"].to_numpy(dtype=np.int64)[keep],
        timestamp=calls["timestamp"].to_numpy(dtype=np.float64)[keep],
    )
    call_session = calls["session"].to_numpy(dtype=np.int64)[keep]
    agents = _agents(workspace, np.unique(columns.agent), columns)
    compactions = _compactions(workspace, filters, columns, session_positions[keep], runs)
    touches = _touches(workspace, filters, columns.agent, session_positions[keep])
    return AnalyticsData(columns, call_session, task_types[keep], agents, compactions, touches)


def _call_level(filters: AnalyticsFilters) -> bool:
    """Filters that select calls within an agent (harness and project select whole sessions)."""
    return bool(
        filters.started_after or filters.started_before or filters.model or filters.task_type
    )


def _date_bounds(filters: AnalyticsFilters) -> tuple[float, float]:
    """[from, to) in seconds since the epoch, UTC dates as for calls; open ends are ±inf."""
    low, high = -np.inf, np.inf
    if filters.started_after:
        low = datetime.fromisoformat(filters.started_after).replace(tzinfo=UTC).timestamp()
    if filters.started_before:
        day = datetime.fromisoformat(filters.started_before).replace(tzinfo=UTC)
        high = (day + timedelta(days=1)).timestamp()
    return low, high


def _call_keys(agent: np.ndarray, session_position: np.ndarray) -> np.ndarray:
    return agent.astype(np.int64) * (1 << 32) + session_position.astype(np.int64)


def _runs_for_calls(
    agent: np.ndarray, session_position: np.ndarray, runs: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """Map each call (by agent and session index) to its run id and task type."""
    run_ids = np.full(len(agent), -1, dtype=np.int64)
    task_types = np.full(len(agent), "unclassified", dtype=object)
    if len(agent) == 0 or len(runs) == 0:
        return run_ids, task_types
    runs = runs.sort_values(["agent", "first"])
    keys = runs["agent"].to_numpy(dtype=np.int64) * (1 << 32) + runs["first"].to_numpy(
        dtype=np.int64
    )
    call_keys = agent * (1 << 32) + session_position
    position = np.searchsorted(keys, call_keys, side="right") - 1
    valid = position >= 0
    candidate = np.where(valid, position, 0)
    same_agent = runs["agent"].to_numpy(dtype=np.int64)[candidate] == agent
    within = session_position <= runs["last"].to_numpy(dtype=np.int64)[candidate]
    hit = valid & same_agent & within
    run_ids[hit] = runs["id"].to_numpy(dtype=np.int64)[candidate[hit]]
    task_types[hit] = runs["task_type"].to_numpy(dtype=object)[candidate[hit]]
    return run_ids, task_types


def _agents(
    workspace: Workspace, agent_ids: np.ndarray, columns: CallColumns
) -> dict[int, AgentRow]:
    if len(agent_ids) == 0:
        return {}
    frame = _frame(
        "SELECT a.id, a.session_id, a.external_id, a.description, a.kind, a.start_kind, COALESCE(a.initial_context, 0) "
        "FROM traces_agent a WHERE a.workspace_id = %s",
        [workspace.pk],
        ["id", "session", "external_id", "description", "kind", "start_kind", "initial_context"],
    )
    frame = frame[frame["id"].isin(agent_ids)]
    totals = (
        pd.DataFrame({"agent": columns.agent, "billed": columns.billed})
        .groupby("agent")["billed"]
        .agg(["size", "sum"])
    )
    frame = frame.join(totals, on="id")
    labels = np.where(
        frame["kind"] == "main", "main", frame["description"].astype(object).fillna("").astype(str)
    )
    labels = np.where(labels == "", frame["external_id"].astype(str), labels)
    return {
        int(pk): AgentRow(int(pk), int(session), str(label)[:80], str(kind), str(start), int(initial), int(calls or 0), float(tokens or 0))
        for pk, session, label, kind, start, initial, calls, tokens in zip(
            frame["id"], frame["session"], labels, frame["kind"], frame["start_kind"], frame["initial_context"],
            frame["size"].fillna(0), frame["sum"].fillna(0), strict=True,
        )
    }  # fmt: skip


def _compactions(
    workspace: Workspace,
    filters: AnalyticsFilters,
    columns: CallColumns,
    session_positions: np.ndarray,
    runs: pd.DataFrame,
) -> CompactionColumns:
    """Full compactions under the same filters as the calls: the agent has a selected call
    (harness, project, model), the compaction's own time is in the date range, and the run
    it ended is of the selected task type."""
    frame = _frame(
        "SELECT k.id, k.agent_id, k.before_call_index, k.after_call_index, k.pre_tokens, k.post_tokens, "
        f"k.summary_tokens, k.duration_ms, {_epoch_sql('k.timestamp')} "
        "FROM traces_compaction k WHERE k.workspace_id = %s AND k.kind = 'full'",
        [workspace.pk],
        ["id", "agent", "before", "after", "pre", "post", "summary", "duration", "timestamp"],
    )
    agents = set(np.unique(columns.agent).tolist())
    frame = frame[frame["agent"].isin(agents)]
    # The first call after each compaction, as a row position in `columns`.
    lookup = {
        (int(a), int(p)): i
        for i, (a, p) in enumerate(
            zip(columns.agent.tolist(), session_positions.tolist(), strict=True)
        )
    }
    after_rows = np.array(
        [
            lookup.get((int(a), int(p)), -1) if pd.notna(p) else -1
            for a, p in zip(frame["agent"], frame["after"], strict=True)
        ],
        dtype=np.int64,
    )
    task_type = _ended_run_type(frame, runs)
    compactions = CompactionColumns(
        agent=frame["agent"].to_numpy(dtype=np.int64),
        after_position=after_rows,
        pre=frame["pre"].to_numpy(dtype=np.float64),
        post=frame["post"].to_numpy(dtype=np.float64),
        summary=frame["summary"].to_numpy(dtype=np.float64),
        duration_ms=frame["duration"].to_numpy(dtype=np.float64),
        task_type=task_type,
    )
    keep = np.ones(len(frame), dtype=bool)
    if filters.started_after or filters.started_before:
        low, high = _date_bounds(filters)
        stamp = pd.to_numeric(frame["timestamp"], errors="coerce").to_numpy(dtype=np.float64)
        # A compaction the harness did not time counts when its next call is selected.
        keep &= np.where(np.isfinite(stamp), (stamp >= low) & (stamp < high), after_rows >= 0)
    if filters.task_type:
        keep &= task_type == filters.task_type
    return compactions if keep.all() else compactions.subset(keep)


def _ended_run_type(frame: pd.DataFrame, runs: pd.DataFrame) -> np.ndarray:
    """Task type of the run each compaction ended: the run holding its last call before,
    else the run before the one it started."""
    if len(frame) == 0 or len(runs) == 0:
        return np.full(len(frame), "unclassified", dtype=object)
    before = pd.to_numeric(frame["before"], errors="coerce")
    known = before.notna().to_numpy()
    _, by_call = _runs_for_calls(
        frame["agent"].to_numpy(dtype=np.int64),
        before.fillna(-1).to_numpy(dtype=np.int64),
        runs,
    )
    ordered = runs.sort_values(["agent", "index"])
    previous = ordered.groupby("agent")["task_type"].shift(1)
    started = ordered["started_by"].notna() & previous.notna()
    before_type = dict(
        zip(ordered.loc[started, "started_by"].astype(np.int64), previous[started], strict=True)
    )
    by_start = frame["id"].map(before_type).fillna("unclassified").to_numpy(dtype=object)
    return np.where(known & (by_call != "unclassified"), by_call, by_start)


def _touches(
    workspace: Workspace,
    filters: AnalyticsFilters,
    call_agents: np.ndarray,
    call_positions: np.ndarray,
) -> TouchColumns:
    """File touches under the same filters as the calls: with date, model or task-type
    filters a touch is kept when the call that made it is selected (its time, its run)."""
    frame = _frame(
        "SELECT t.agent_id, t.run_index, t.call_index, t.path, t.token_position FROM traces_filetouch t WHERE t.workspace_id = %s",
        [workspace.pk],
        ["agent", "run", "call", "path", "position"],
    )
    if _call_level(filters):
        selected = _call_keys(call_agents, call_positions)
        touched = _call_keys(
            frame["agent"].to_numpy(dtype=np.int64), frame["call"].to_numpy(dtype=np.int64)
        )
        frame = frame[np.isin(touched, selected)]
    else:
        frame = frame[frame["agent"].isin(np.unique(call_agents))]
    return TouchColumns(
        agent=frame["agent"].to_numpy(dtype=np.int64),
        run=frame["run"].to_numpy(dtype=np.int64),
        path=pd.factorize(frame["path"])[0].astype(np.int64),
        position=frame["position"].to_numpy(dtype=np.int64),
    )


def result_for(*, workspace: Workspace, filters: AnalyticsFilters) -> AnalyticsResult | None:
    return AnalyticsResult.objects.filter(workspace=workspace, filter_key=filters.key).first()


def latest_job(*, workspace: Workspace, filters: AnalyticsFilters) -> Job | None:
    """The most recent analytics job for these filters, whatever its status."""
    return (
        Job.objects.filter(workspace=workspace, kind=JOB_KIND, params__key=filters.key)
        .order_by("-created_at", "-id")
        .first()
    )


def failed_on(job: Job | None, data_version: int) -> bool:
    """Whether `job` failed computing `data_version` (the version it read when it started,
    else the one current when it was queued)."""
    if job is None or job.status != JobStatus.FAILED:
        return False
    version = (job.counts or {}).get("data_version", (job.params or {}).get("data_version"))
    return version == data_version


def failure_reason(job: Job) -> str:
    """The first line of a failed job's error (the rest is its traceback)."""
    return (job.error or "").strip().split("\n", 1)[0] or "no reason was recorded"
