"""Loading analytics columns as numpy arrays (never model instances).

On PostgreSQL the columns stream through `COPY (SELECT …) TO STDOUT` into pandas' C
reader; elsewhere through a plain cursor.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
from django.db import connection
from django.db.models import F, FloatField
from django.db.models.expressions import RawSQL

from governance.models import Workspace
from traces.analysis.compactions import CompactionColumns
from traces.analysis.costs import CallColumns
from traces.analysis.coverage import TouchColumns
from traces.analysis.incidents import AgentRow
from traces.analytics.selectors.filters import AnalyticsFilters, selected_calls

# CSV parsed at a time while a COPY streams in: a block's text and its parser's buffers
# are all that is held besides the columns, never the whole table's text.
COPY_BLOCK_BYTES = 8 << 20


def _columns(sql: str, params: list, columns: dict[str, object]) -> dict[str, np.ndarray]:
    """The query's rows as one numpy array per column; `columns` maps each name to its
    dtype: a numpy type, `str` for text (an object array, NaN for NULL), or None for a
    nullable number (float with NaN where NULL)."""
    names = list(columns)
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            frame = pd.DataFrame(cursor.fetchall(), columns=names)
        return {name: _array(frame[name], dtype) for name, dtype in columns.items()}
    parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
    dtypes = {name: dtype for name, dtype in columns.items() if dtype is not None}

    def parse(block: list[bytes]) -> None:
        frame = pd.read_csv(
            io.BytesIO(b"".join(block)), header=None, names=names, dtype=dtypes, na_filter=True
        )
        for name in names:
            parts[name].append(frame[name].to_numpy())

    with connection.cursor() as cursor:
        query = cursor.cursor.mogrify(sql, params)
        with cursor.cursor.copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv)") as copy:
            block, size = [], 0
            for row in copy:  # one message per row
                block.append(bytes(row))
                size += len(row)
                if size >= COPY_BLOCK_BYTES:
                    parse(block)
                    block, size = [], 0
            if block:
                parse(block)
    result = {}
    for name, dtype in columns.items():
        chunks = parts.pop(name)  # concatenated one column at a time
        result[name] = (
            np.concatenate(chunks)
            if chunks
            else np.zeros(0, dtype=object if dtype is str else dtype or np.float64)
        )
    return result


def _array(series: pd.Series, dtype) -> np.ndarray:
    if dtype is None:
        return pd.to_numeric(series).to_numpy(dtype=np.float64)
    return series.to_numpy(dtype=object if dtype is str else dtype)


def _frame(sql: str, params: list, columns: list[str], text: tuple[str, ...] = ()) -> pd.DataFrame:
    """A small table (runs, agents, compactions) as a DataFrame: the `text` columns as
    text, the others as numbers (float where NULL is possible)."""
    return pd.DataFrame(
        _columns(sql, params, {name: str if name in text else None for name in columns})
    )


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


CALL_COLUMNS = {
    "agent": np.int64,
    "position": np.int64,
    "session_index": np.int64,
    "session": np.int64,
    "context": np.int64,
    "billed": np.int64,
    "output": np.int64,
    "timestamp": np.float64,
}


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
    calls = _columns(*columns.query.sql_with_params(), CALL_COLUMNS)
    order = np.lexsort((calls["position"], calls["agent"]))  # by agent, then its calls
    if not (order[1:] > order[:-1]).all():
        for name in calls:  # one column at a time: one extra column held, not all of them
            calls[name] = calls[name][order]
    del order
    runs = _frame(
        'SELECT r.id, r.agent_id, r.first_call_index, r.last_call_index, r.task_type, r.started_by_id, r."index" '
        "FROM traces_run r WHERE r.workspace_id = %s",
        [workspace.pk],
        ["id", "agent", "first", "last", "task_type", "started_by", "index"],
        text=("task_type",),
    )
    session_positions = calls["session_index"]
    run_ids, task_types = _runs_for_calls(calls["agent"], session_positions, runs)
    if filters.task_type:
        keep = task_types == filters.task_type
        for name in calls:
            calls[name] = calls[name][keep]
        run_ids, task_types, session_positions = (
            run_ids[keep],
            task_types[keep],
            session_positions[keep],
        )
    columns = CallColumns(
        agent=calls["agent"],
        run=run_ids,
        context=calls["context"],
        billed=calls["billed"],
        output=calls["output"],
        timestamp=calls["timestamp"],
    )
    call_session = calls["session"]
    agents = _agents(workspace, np.unique(columns.agent), columns)
    compactions = _compactions(workspace, filters, columns, session_positions, runs)
    touches = _touches(workspace, filters, columns.agent, session_positions)
    return AnalyticsData(columns, call_session, task_types, agents, compactions, touches)


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


def _rows_of(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The position in `keys` of each wanted key (the last one if repeated), -1 if absent."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    found = np.searchsorted(ordered, wanted, side="right") - 1
    hit = (found >= 0) & (ordered[np.maximum(found, 0)] == wanted)
    return np.where(hit, order[np.maximum(found, 0)], -1).astype(np.int64)


def _runs_for_calls(
    agent: np.ndarray, session_position: np.ndarray, runs: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """Map each call (by agent and session index) to its run id and task type.

    Written to hold few call-sized temporaries at once: at a million calls each is 8 MB."""
    if len(agent) == 0 or len(runs) == 0:
        return np.full(len(agent), -1, dtype=np.int64), np.full(
            len(agent), "unclassified", dtype=object
        )
    runs = runs.sort_values(["agent", "first"])
    run_agent = runs["agent"].to_numpy(dtype=np.int64)
    keys = run_agent * (1 << 32) + runs["first"].to_numpy(dtype=np.int64)
    candidate = np.searchsorted(keys, _call_keys(agent, session_position), side="right")
    candidate -= 1
    hit = candidate >= 0
    np.maximum(candidate, 0, out=candidate)
    hit &= run_agent[candidate] == agent
    hit &= session_position <= runs["last"].to_numpy(dtype=np.int64)[candidate]
    run_ids = runs["id"].to_numpy(dtype=np.int64)[candidate]
    run_ids[~hit] = -1
    names, codes = np.unique(runs["task_type"].to_numpy(dtype=object), return_inverse=True)
    labels = np.array([*names.tolist(), "unclassified"], dtype=object)
    type_code = codes.astype(np.int32)[candidate]
    del candidate
    type_code[~hit] = len(names)
    return run_ids, labels[type_code]


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
        text=("external_id", "description", "kind", "start_kind"),
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
    # The first call after each compaction, as a row position in `columns` (-1: none).
    after = pd.to_numeric(frame["after"], errors="coerce").to_numpy(dtype=np.float64)
    known = np.isfinite(after)
    after_rows = _rows_of(
        _call_keys(columns.agent, session_positions),
        _call_keys(frame["agent"].to_numpy(dtype=np.int64), np.where(known, after, 0)),
    )
    after_rows[~known] = -1
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
    by_start = frame["id"].map(before_type).astype(object).fillna("unclassified").to_numpy()
    return np.where(known & (by_call != "unclassified"), by_call, by_start)


def _touches(
    workspace: Workspace,
    filters: AnalyticsFilters,
    call_agents: np.ndarray,
    call_positions: np.ndarray,
) -> TouchColumns:
    """File touches under the same filters as the calls: with date, model or task-type
    filters a touch is kept when the call that made it is selected (its time, its run)."""
    touches = _columns(
        "SELECT t.agent_id, t.run_index, t.call_index, t.path, t.token_position FROM traces_filetouch t WHERE t.workspace_id = %s",
        [workspace.pk],
        {"agent": np.int64, "run": np.int64, "call": np.int64, "path": str, "position": np.int64},
    )
    if _call_level(filters):
        keep = np.isin(
            _call_keys(touches["agent"], touches["call"]), _call_keys(call_agents, call_positions)
        )
    else:
        keep = np.isin(touches["agent"], np.unique(call_agents))
    if not keep.all():
        touches = {name: values[keep] for name, values in touches.items()}
    return TouchColumns(
        agent=touches["agent"],
        run=touches["run"],
        path=pd.factorize(touches["path"])[0].astype(np.int64),
        position=touches["position"],
    )
