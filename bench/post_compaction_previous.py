"""The post-compaction loader as it was before the match cache and the binary COPY reads
(main at aad3aff), kept as the benchmark's baseline: `corpus_load` here reads every call of
the observed agents packed by `string_agg`, every operator prompt, and matches each one."""

from __future__ import annotations

import numpy as np
import pandas as pd
from django.db import connection

from governance.models import Workspace
from traces.analysis.post_compaction import (
    MAX_STEP,
    PROMPT_KINDS,
    Corpus,
    Observations,
    PhraseMatcher,
)
from traces.analytics.selectors import (
    AnalyticsFilters,
    _call_level,
    _runs_for_calls,
    selected_calls,
)
from traces.models import Call, Harness, OperatorPrompt, Run

MAX_MATCHES = 2000  # correction messages kept in the cached result for audit
EXCERPT_CHARS = 240
HARNESSES_WITH_ERROR_FLAGS = {Harness.CLAUDE_CODE}  # Codex rollouts flag no tool result


def corpus_load(
    *, workspace: Workspace, filters: AnalyticsFilters, matcher: PhraseMatcher
) -> Corpus:
    """The observations of main-thread runs that a full compaction started, up to step
    MAX_STEP: one per operator message (hit = a phrase matched) and one per tool result of
    a harness that flags errors (hit = is_error). Steps count every call of the run; the
    filters then select which calls are observed.

    Reads the facts the loader stored with each call's text (`text_facts`: prompt kind and
    tool result and error counts) and the operator prompts alone, never the texts."""
    runs, calls = observed_calls(workspace=workspace, filters=filters)
    if runs is None:
        return _empty_corpus()
    flags_errors = runs["id"][runs["harness"].isin(HARNESSES_WITH_ERROR_FLAGS)].to_numpy(np.int64)
    with_results = calls[calls["run"].isin(flags_errors) & (calls["tool_results"] > 0)]
    results = with_results["tool_results"].to_numpy(np.int64)
    errors = with_results["tool_errors"].to_numpy(np.int64)
    # Per call, its errors then its other results: only the counts matter to the rates.
    first_of_call = np.repeat(np.cumsum(results) - results, results)
    tool_hit = (np.arange(int(results.sum())) - first_of_call) < np.repeat(errors, results)
    tool_results = Observations(
        np.repeat(with_results["run"].to_numpy(np.int64), results),
        np.repeat(with_results["step"].to_numpy(np.int64), results),
        tool_hit,
    )
    kinds = calls["prompt_kind"]
    excluded = {
        str(kind): int(count)
        for kind, count in sorted(
            kinds[(kinds != "") & (kinds != "operator")].value_counts().items()
        )
    }
    operator = calls[kinds == "operator"]
    prompts = _operator_prompts(workspace.pk, [int(a) for a in runs["agent"].unique()])
    labels = {
        int(run): {"trigger": trigger, "task_type": task_type}
        for run, trigger, task_type in zip(
            runs["id"].tolist(), runs["trigger"].tolist(), runs["task_type"].tolist(), strict=True
        )
    }
    hits = np.zeros(len(operator), bool)
    matches: list[dict] = []
    for position, (call_id, run, step, session, session_index) in enumerate(
        zip(
            operator["id"].tolist(),
            operator["run"].tolist(),
            operator["step"].tolist(),
            operator["session"].tolist(),
            operator["session_index"].tolist(),
            strict=True,
        )
    ):
        prompt = prompts.get(call_id)
        found = matcher.match(prompt) if prompt is not None else None
        if found is None:
            continue
        hits[position] = True
        if len(matches) < MAX_MATCHES:
            matches.append(
                _match_row(prompt, found, run, labels[run], session, session_index, step)
            )
    matches.sort(key=lambda m: (m["session"], m["call_index"]))
    return Corpus(
        Observations(operator["run"].to_numpy(np.int64), operator["step"].to_numpy(np.int64), hits),
        tool_results,
        {int(k): str(v) for k, v in zip(runs["id"], runs["task_type"], strict=True)},
        {int(k): str(v) for k, v in zip(runs["id"], runs["trigger"], strict=True)},
        matches,
        excluded,
        int(hits.sum()),
    )


def _empty_corpus() -> Corpus:
    empty = Observations(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))
    return Corpus(empty, empty, {}, {})


def observed_calls(
    *, workspace: Workspace, filters: AnalyticsFilters
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The runs a full compaction started on a main thread (id, agent, first, last,
    task_type, trigger, session, harness, index) and the calls observed in them, in run
    and step order (id, run, step, session, session_index and the stored text facts);
    (None, None) without such runs."""
    runs = Run.objects.filter(
        workspace=workspace,
        started_by__isnull=False,
        started_by__kind="full",
        agent__kind="main",
    )
    if filters.task_type:
        runs = runs.filter(task_type=filters.task_type)
    if filters.harness:
        runs = runs.filter(session__harness=filters.harness)
    rows = list(
        runs.values_list(
            "id",
            "agent_id",
            "first_call_index",
            "last_call_index",
            "task_type",
            "started_by__trigger",
            "session_id",
            "session__harness",
            "index",
        )
    )
    if not rows:
        return None, None
    frame = pd.DataFrame(
        rows,
        columns=[
            "id",
            "agent",
            "first",
            "last",
            "task_type",
            "trigger",
            "session",
            "harness",
            "index",
        ],
    )
    calls = _packed_calls(workspace.pk, [int(a) for a in frame["agent"].unique()])
    run_ids, _ = _runs_for_calls(
        calls["agent"].to_numpy(np.int64), calls["session_index"].to_numpy(np.int64), frame
    )
    calls["run"] = run_ids
    calls = calls[calls["run"].isin(frame["id"])].sort_values(["run", "agent_index"])
    calls["step"] = calls.groupby("run").cumcount() + 1
    calls = calls[calls["step"] <= MAX_STEP]
    if filters.project or filters.harness or _call_level(filters):
        chosen = set()
        ids = calls["id"].tolist()
        for start in range(0, len(ids), 20_000):
            chosen.update(
                selected_calls(workspace, filters)
                .filter(id__in=ids[start : start + 20_000])
                .values_list("id", flat=True)
            )
        calls = calls[calls["id"].isin(chosen)]
    return frame, calls


# One call as packed by `_packed_calls`: big-endian, as PostgreSQL's *send functions write.
_PACKED_CALL = np.dtype(
    [
        ("id", ">i8"),
        ("agent", ">i8"),
        ("session", ">i8"),
        ("session_index", ">i4"),
        ("agent_index", ">i4"),
        ("prompt_kind", ">i2"),
        ("tool_results", ">i4"),
        ("tool_errors", ">i4"),
    ]
)
PACKED_AGENTS = 500  # agents per query: a few tens of MB of packed calls at most


def _packed_calls(workspace_pk: int, agents: list[int]) -> pd.DataFrame:
    """The calls of `agents` (id, agent, session, session_index, agent_index, prompt_kind,
    tool_results, tool_errors). The database packs each query's rows into one bytea of
    fixed-width records, read with numpy: a million rows streamed one by one cost seconds."""
    if connection.vendor != "postgresql":
        return _calls_by_orm(workspace_pk, agents)
    kinds = list(PROMPT_KINDS)
    labels = np.array(["unknown", *kinds], dtype=object)  # array_position is 1-based
    parts = []
    with connection.cursor() as cursor:
        for start in range(0, len(agents), PACKED_AGENTS):
            cursor.execute(
                "SELECT string_agg(int8send(id) || int8send(agent_id) || int8send(session_id) "
                "|| int4send(session_index) || int4send(agent_index) "
                "|| int2send(COALESCE(array_position(%s::text[], prompt_kind::text), 0)::int2) "
                "|| int4send(tool_results) || int4send(tool_errors), ''::bytea) "
                "FROM traces_call WHERE workspace_id = %s AND agent_id = ANY(%s)",
                [kinds, workspace_pk, agents[start : start + PACKED_AGENTS]],
            )
            data = cursor.fetchone()[0]
            if data:
                parts.append(np.frombuffer(bytes(data), dtype=_PACKED_CALL))
    packed = np.concatenate(parts) if parts else np.zeros(0, dtype=_PACKED_CALL)
    frame = pd.DataFrame(
        {
            name: packed[name].astype(np.int64)
            for name in _PACKED_CALL.names
            if name != "prompt_kind"
        }
    )
    frame["prompt_kind"] = labels[packed["prompt_kind"]]
    return frame


def _calls_by_orm(workspace_pk: int, agents: list[int]) -> pd.DataFrame:
    """`_packed_calls` for the embedded SQLite default: the same columns, row by row."""
    columns = [
        "id", "agent_id", "session_id", "session_index", "agent_index", "prompt_kind",
        "tool_results", "tool_errors",
    ]  # fmt: skip
    rows = []
    for start in range(0, len(agents), PACKED_AGENTS):
        rows.extend(
            Call.objects.filter(
                workspace_id=workspace_pk, agent_id__in=agents[start : start + PACKED_AGENTS]
            )
            .order_by()
            .values_list(*columns)
        )
    frame = pd.DataFrame(rows, columns=[name for name in _PACKED_CALL.names])
    known = set(PROMPT_KINDS)
    frame["prompt_kind"] = [
        kind if kind in known else "unknown" for kind in frame["prompt_kind"].tolist()
    ]
    for name in _PACKED_CALL.names:
        if name != "prompt_kind":
            frame[name] = frame[name].astype(np.int64)
    return frame


def _operator_prompts(workspace_pk: int, agents: list[int]) -> dict[int, str]:
    """The operator prompts of the agents' calls, by call id (steps past MAX_STEP too: the
    agents' list is a far smaller parameter than the observed calls' ids)."""
    if connection.vendor != "postgresql":
        prompts = {}
        for start in range(0, len(agents), PACKED_AGENTS):
            prompts.update(
                OperatorPrompt.objects.filter(
                    call__workspace_id=workspace_pk,
                    call__agent_id__in=agents[start : start + PACKED_AGENTS],
                    call__prompt_kind="operator",
                ).values_list("call_id", "text")
            )
        return prompts
    prompts = {}
    with connection.cursor() as cursor:
        for start in range(0, len(agents), PACKED_AGENTS):
            cursor.execute(
                "SELECT p.call_id, p.text FROM traces_operatorprompt p "
                "JOIN traces_call c ON c.id = p.call_id "
                "WHERE c.workspace_id = %s AND c.agent_id = ANY(%s) AND c.prompt_kind = %s",
                [workspace_pk, agents[start : start + PACKED_AGENTS], "operator"],
            )
            prompts.update(cursor.fetchall())
    return prompts


def _match_row(
    prompt: str, found: tuple[str, str], run: int, labels: dict, session, session_index, step
) -> dict:
    phrase, matched = found
    at = prompt.lower().find(matched.lower())
    lo = max(0, at - EXCERPT_CHARS // 2)
    excerpt = prompt[lo : lo + EXCERPT_CHARS]
    return {
        "session": int(session),
        "run": int(run),
        "call_index": int(session_index),
        "step": int(step),
        "trigger": str(labels["trigger"]),
        "task_type": str(labels["task_type"]),
        "phrase": phrase,
        "matched": matched,
        "excerpt": ("…" if lo else "")
        + excerpt
        + ("…" if lo + EXCERPT_CHARS < len(prompt) else ""),
    }
