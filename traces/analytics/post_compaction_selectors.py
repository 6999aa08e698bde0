"""Reads for behaviour after compaction: the workspace's correction phrase list and the
observations (operator messages, tool results) by step since the last compaction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from governance.models import Workspace
from traces.analysis.post_compaction import (
    DEFAULT_PHRASE_VERSION,
    DEFAULT_PHRASES,
    MAX_STEP,
    Corpus,
    Observations,
    PhraseMatcher,
    message_kind,
)
from traces.analytics.models import CorrectionPhraseList
from traces.analytics.selectors import (
    AnalyticsFilters,
    _call_level,
    _runs_for_calls,
    selected_calls,
)
from traces.ingest.writes import decompress_text
from traces.models import Call, CallText, Harness, Run

TEXT_CHUNK = 1000
MAX_MATCHES = 2000  # correction messages kept in the cached result for audit
EXCERPT_CHARS = 240
HARNESSES_WITH_ERROR_FLAGS = {Harness.CLAUDE_CODE}  # Codex rollouts flag no tool result


@dataclass(frozen=True)
class PhraseList:
    version: int
    phrases: list[str]
    row: CorrectionPhraseList | None  # None: the shipped default, never saved


def phrase_list_current(*, workspace: Workspace) -> PhraseList:
    row = CorrectionPhraseList.objects.filter(workspace=workspace).order_by("-version").first()
    if row is None:
        return PhraseList(DEFAULT_PHRASE_VERSION, list(DEFAULT_PHRASES), None)
    return PhraseList(row.version, list(row.phrases), row)


def phrase_list_history(*, workspace: Workspace):
    return CorrectionPhraseList.objects.filter(workspace=workspace).select_related("created_by")


def corpus_load(
    *, workspace: Workspace, filters: AnalyticsFilters, matcher: PhraseMatcher
) -> Corpus:
    """The observations of main-thread runs that a full compaction started, up to step
    MAX_STEP: one per operator message (hit = a phrase matched) and one per tool result of
    a harness that flags errors (hit = is_error). Steps count every call of the run; the
    filters then select which calls are observed."""
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
    empty = Observations(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))
    if not rows:
        return Corpus(empty, empty, {}, {})
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
    calls = pd.DataFrame(
        Call.objects.filter(workspace=workspace, agent_id__in=frame["agent"].unique().tolist())
        .order_by()
        .values_list("id", "agent_id", "session_index", "agent_index", "session_id"),
        columns=["id", "agent", "session_index", "agent_index", "session"],
    )
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
    # A plain dict: a pandas lookup per call costs more than decompressing its text.
    by_id = dict(
        zip(
            calls["id"].tolist(),
            zip(
                calls["run"].tolist(),
                calls["step"].tolist(),
                calls["session"].tolist(),
                calls["session_index"].tolist(),
                strict=True,
            ),
            strict=True,
        )
    )
    run_info = frame.set_index("id")
    flags_errors = {
        int(r) for r, h in zip(frame["id"], frame["harness"], strict=True)
        if h in HARNESSES_WITH_ERROR_FLAGS
    }  # fmt: skip
    corr_run, corr_step, corr_hit = [], [], []
    tool_run, tool_step, tool_hit = [], [], []
    matches: list[dict] = []
    matched_total = 0
    excluded: dict[str, int] = {}
    ids = list(by_id)
    for start in range(0, len(ids), TEXT_CHUNK):
        chunk = ids[start : start + TEXT_CHUNK]
        for call_id, data in CallText.objects.filter(call_id__in=chunk).values_list(
            "call_id", "data"
        ):
            text = decompress_text(data)
            run, step, session, session_index = by_id[call_id]
            prompt = text.get("prompt")
            if isinstance(prompt, str) and prompt.strip():
                kind = message_kind(prompt)
                if kind != "operator":
                    excluded[kind] = excluded.get(kind, 0) + 1
                else:
                    found = matcher.match(prompt)
                    corr_run.append(run)
                    corr_step.append(step)
                    corr_hit.append(found is not None)
                    if found is not None:
                        matched_total += 1
                        if len(matches) < MAX_MATCHES:
                            matches.append(
                                _match_row(
                                    prompt, found, run_info.loc[run], session, session_index, step
                                )
                            )
            if run in flags_errors:
                for result in (text.get("results") or {}).values():
                    tool_run.append(run)
                    tool_step.append(step)
                    tool_hit.append(bool(result.get("is_error")))
    matches.sort(key=lambda m: (m["session"], m["call_index"]))

    def obs(r, s, h):
        return Observations(np.array(r, np.int64), np.array(s, np.int64), np.array(h, bool))

    corpus = Corpus(
        obs(corr_run, corr_step, corr_hit),
        obs(tool_run, tool_step, tool_hit),
        {int(k): str(v) for k, v in zip(frame["id"], frame["task_type"], strict=True)},
        {int(k): str(v) for k, v in zip(frame["id"], frame["trigger"], strict=True)},
        matches,
        excluded,
        matched_total,
    )
    return corpus


def _match_row(prompt: str, found: tuple[str, str], run, session, session_index, step) -> dict:
    phrase, matched = found
    at = prompt.lower().find(matched.lower())
    lo = max(0, at - EXCERPT_CHARS // 2)
    excerpt = prompt[lo : lo + EXCERPT_CHARS]
    return {
        "session": int(session),
        "run": int(run.name),
        "call_index": int(session_index),
        "step": int(step),
        "trigger": str(run["trigger"]),
        "task_type": str(run["task_type"]),
        "phrase": phrase,
        "matched": matched,
        "excerpt": ("…" if lo else "")
        + excerpt
        + ("…" if lo + EXCERPT_CHARS < len(prompt) else ""),
    }
