"""Differential tests of trace ingestion: generated transcripts of many shapes (see
transcript_shapes.py) are ingested by the product and counted by an independent reference
written here, which reads the files with the stdlib `json` and shares no code with the
parsers.

The reference counts by these rules (docs/traces.md, TRACE_FORMATS.md §1–2, issue 15):

Claude Code
* A call is an `assistant` line (or a line without `type` whose message role is
  assistant) with a `message.usage` object and a model other than "<synthetic>".
* Its identity is (sessionId, message.id, requestId), or (sessionId, message.id) without
  a requestId; a line without message.id is a call of its own.
* Of a call's lines, the kept one is a main-thread line over a sidechain line (main
  thread: not `isSidechain`, in a session file), then the highest `output_tokens`, then
  the last read (files in sorted path order, lines in order).
* Classes: input = input_tokens; cache_creation = ephemeral 5m + 1h when that breakdown
  exists and sums > 0, else cache_creation_input_tokens; cache_read =
  cache_read_input_tokens; output = output_tokens.
* Agent of a line: every line of `agent-<id>.jsonl` belongs to <id>; a non-sidechain line
  of a session file to "main"; an inline sidechain line to its `agentId`, else to the
  agent of the line its parentUuid names (in the same file), and a sidechain line whose
  parent is missing, null or not a sidechain line starts an agent of its own.
* Compactions: each compact_boundary / microcompact_boundary system line, identified by
  (sessionId, uuid); an `isCompactSummary` user line is one only when it follows no
  boundary (neither its parent nor the line before it is one).
* A session's agents: those owning a kept call or a compaction, plus "main". The Session
  row's `agent_count` leaves out compaction summarisers (`agent-acompact-*.jsonl`), and its
  `compaction_count` counts full compactions only (not microcompact boundaries); the rows
  hold all of them.

Codex (token classes mapped to Anthropic's split, as `Call.input_tokens` is uncached)
* A call is a `token_count` event whose `total_token_usage` grew since the previous one
  (from zero for the first); an unchanged one adds nothing; when the totals are missing
  or any field went down, the call is `last_token_usage`. An all-zero call is none.
* input = input_tokens − cached_input_tokens; cache_read = cached_input_tokens;
  cache_creation = 0 (the generator writes no cache_write_input_tokens); output =
  output_tokens, which includes reasoning.
* A rollout whose session_meta has `source.subagent.thread_spawn` opens by replaying its
  parent's token history, stamped in one second (TRACE_FORMATS.md §2, Hazards): the
  token_count events in the second of its first usage-bearing one are the parent's and
  add nothing; the child's totals continue from the last of them. docs/traces.md does
  not say how the product treats such a fork; this is the reading taken here.
* Each `compacted` line is a compaction. A session (session_meta id) has one agent, main.
"""

from __future__ import annotations

import bisect
import dataclasses
import io
import json
import os
import random
import re
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.db.models import Count, Sum

from tests.traces.transcript_shapes import write_claude_corpus, write_codex_corpus
from traces.formats import detect_format, make_parser
from traces.ingest import IngestSummary, TraceLoader
from traces.models import Agent, Call, Compaction, Session, UploadSource
from traces.services import ingest_paths, sessions_derive, trace_uploads_receive

pytestmark = pytest.mark.django_db

CLASSES = ("input", "cache_creation", "cache_read", "output")
CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
AGENT_FILE = re.compile(r"agent-(.+)\.jsonl")
BOUNDARIES = {"compact_boundary", "microcompact_boundary"}
CODEX_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")
UUID_TAIL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
DERIVED = "~"  # prefix of agents the reference names after the line that started them


# --- the reference ---------------------------------------------------------------------------


@dataclass
class SessionTruth:
    harness: str
    calls: int = 0
    input: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output: int = 0
    compactions: int = 0
    micro_compactions: int = 0
    agent_calls: Counter = field(default_factory=Counter)
    compaction_agents: set = field(default_factory=set)

    @property
    def agents(self) -> set[str]:
        return set(self.agent_calls) | self.compaction_agents | {"main"}

    @property
    def working_agents(self) -> set[str]:
        return {agent for agent in self.agents if not agent.startswith("acompact")}


@dataclass
class CorpusTruth:
    sessions: dict[tuple[str, str], SessionTruth] = field(default_factory=dict)
    files: int = 0
    usage_lines: int = 0  # lines that could be a call: Claude usage lines, Codex token counts
    max_line_gap: int = 0  # lines between the first and last line of one call in a file
    max_calls_spanned: int = 0  # other calls starting between a call's first and last line
    max_file_bytes: int = 0
    max_line_bytes: int = 0

    def total(self, name: str) -> int:
        if name == "agents":
            return sum(len(s.agents) for s in self.sessions.values())
        if name == "sessions":
            return len(self.sessions)
        if name == "files":
            return self.files
        return sum(getattr(s, name) for s in self.sessions.values())

    def session(self, harness: str, session_id: str) -> SessionTruth:
        key = (harness, session_id)
        if key not in self.sessions:
            self.sessions[key] = SessionTruth(harness)
        return self.sessions[key]


def transcript_files(paths: Iterable[Path]) -> list[Path]:
    """Transcript files under the paths, in the product's order (sorted by path)."""
    found = set()
    for path in paths:
        if path.is_dir():
            found |= {p for p in path.rglob("*.jsonl") if p.is_file()}
        else:
            found.add(path)
    return sorted(found, key=str)


def read_lines(path: Path, truth: CorpusTruth) -> list[dict]:
    objects = []
    truth.files += 1
    truth.max_file_bytes = max(truth.max_file_bytes, path.stat().st_size)
    with open(path, "rb") as handle:
        for raw in handle:
            truth.max_line_bytes = max(truth.max_line_bytes, len(raw))
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict):
                objects.append(value)
    return objects


def reference(paths: Iterable[Path]) -> CorpusTruth:
    """The true counts of every Claude Code and Codex transcript under the paths."""
    truth = CorpusTruth()
    claude = ClaudeReference(truth)
    for path in transcript_files(paths):
        lines = read_lines(path, truth)
        if lines and lines[0].get("type") in CODEX_TYPES:
            codex_file(path, lines, truth)
        elif lines:
            claude.add_file(path, lines)
    claude.finish()
    return truth


def claude_classes(usage: dict) -> tuple[int, int, int, int]:
    created = usage.get("cache_creation_input_tokens") or 0
    breakdown = usage.get("cache_creation")
    if isinstance(breakdown, dict):
        parts = (breakdown.get("ephemeral_5m_input_tokens") or 0) + (
            breakdown.get("ephemeral_1h_input_tokens") or 0
        )
        if parts > 0:
            created = parts
    return (
        usage.get("input_tokens") or 0,
        created,
        usage.get("cache_read_input_tokens") or 0,
        usage.get("output_tokens") or 0,
    )


class ClaudeReference:
    def __init__(self, truth: CorpusTruth):
        self.truth = truth
        self.calls: dict[tuple, tuple] = {}  # key -> (rank, classes, session, agent)
        self.compactions: dict[tuple, tuple] = {}  # key -> (session, agent, micro)
        self.order = 0

    def add_file(self, path: Path, lines: list[dict]) -> None:
        match = AGENT_FILE.fullmatch(path.name)
        file_agent = match.group(1) if match else None
        by_uuid = {line["uuid"]: line for line in lines if isinstance(line.get("uuid"), str)}
        agents: dict[int, str] = {}

        def agent_of(line: dict, number: int) -> str:
            if file_agent is not None:
                return file_agent
            if not line.get("isSidechain"):
                return "main"
            chain, current = [], line
            while True:
                known = agents.get(id(current))
                if known is not None:
                    break
                if isinstance(current.get("agentId"), str) and current["agentId"]:
                    known = current["agentId"]
                    break
                parent = by_uuid.get(current.get("parentUuid"))
                if parent is None or not parent.get("isSidechain") or len(chain) > len(lines):
                    known = DERIVED + str(current.get("uuid") or f"{path}:{number}")
                    break
                chain.append(current)
                current = parent
            for item in (*chain, current):
                agents[id(item)] = known
            return known

        fallback_session = path.stem
        boundary_uuids: set = set()
        previous_was_boundary = False
        spans: dict[tuple, list[int]] = {}
        for number, line in enumerate(lines):
            kind = line.get("type")
            session = line.get("sessionId") or fallback_session
            message = line.get("message") if isinstance(line.get("message"), dict) else {}
            is_boundary = kind == "system" and line.get("subtype") in BOUNDARIES
            if kind == "assistant" or (kind is None and message.get("role") == "assistant"):
                usage = message.get("usage")
                if isinstance(usage, dict) and message.get("model") != "<synthetic>":
                    self.add_call(line, number, path, session, usage, agent_of, spans)
            elif is_boundary:
                boundary_uuids.add(line.get("uuid"))
                micro = line.get("subtype") == "microcompact_boundary"
                self.compactions.setdefault(
                    (session, line.get("uuid")), (session, agent_of(line, number), micro)
                )
            elif kind == "user" and line.get("isCompactSummary") is True:
                follows = previous_was_boundary or line.get("parentUuid") in boundary_uuids
                if not follows:
                    key = (session, line.get("uuid"))
                    self.compactions.setdefault(key, (session, agent_of(line, number), False))
            previous_was_boundary = is_boundary
        self.measure_spans(spans)

    def add_call(self, line, number, path, session, usage, agent_of, spans) -> None:
        self.order += 1
        self.truth.usage_lines += 1
        message_id = line["message"].get("id")
        if message_id:
            key = (session, message_id, line.get("requestId") or None)
        else:
            key = (session, None, f"{path}:{number}")
        span = spans.setdefault(key, [number, number])
        span[1] = number
        main_thread = not AGENT_FILE.fullmatch(path.name) and not line.get("isSidechain")
        rank = (main_thread, usage.get("output_tokens") or 0, self.order)
        kept = self.calls.get(key)
        if kept is None or rank > kept[0]:
            self.calls[key] = (rank, claude_classes(usage), session, agent_of(line, number))

    def measure_spans(self, spans: dict[tuple, list[int]]) -> None:
        firsts = sorted(first for first, _ in spans.values())
        truth = self.truth
        for first, last in spans.values():
            if last > first:
                truth.max_line_gap = max(truth.max_line_gap, last - first)
                between = bisect.bisect_left(firsts, last) - bisect.bisect_right(firsts, first)
                truth.max_calls_spanned = max(truth.max_calls_spanned, between)

    def finish(self) -> None:
        for _, classes, session, agent in self.calls.values():
            target = self.truth.session("claude-code", session)
            target.calls += 1
            for name, value in zip(CLASSES, classes, strict=True):
                setattr(target, name, getattr(target, name) + value)
            target.agent_calls[agent] += 1
        for session, agent, micro in self.compactions.values():
            target = self.truth.session("claude-code", session)
            target.compactions += 1
            target.micro_compactions += micro
            target.compaction_agents.add(agent)


def codex_file(path: Path, lines: list[dict], truth: CorpusTruth) -> None:
    meta = next((line for line in lines if line.get("type") == "session_meta"), None)
    payload = (meta or {}).get("payload") or {}
    tail = UUID_TAIL.search(path.stem)
    session_id = payload.get("id") or (tail.group(0) if tail else path.stem)
    target = truth.session("codex", session_id)
    source = payload.get("source")
    replay_second = None
    if isinstance(source, dict) and "thread_spawn" in (source.get("subagent") or {}):
        first = next((line for line in lines if _token_info(line)), None)
        replay_second = first["timestamp"][:19] if first else None
    previous = None
    for line in lines:
        if line.get("type") == "compacted":
            target.compactions += 1
            continue
        info = _token_info(line)
        if not info:
            continue
        truth.usage_lines += 1
        total, last = info.get("total_token_usage"), info.get("last_token_usage")
        if replay_second is not None:
            if line.get("timestamp", "")[:19] == replay_second:
                previous = total or previous
                continue
            replay_second = None
        if total is None:
            call = last
        elif previous is None:
            call = total
        else:
            growth = {k: total[k] - previous[k] for k in CODEX_FIELDS}
            call = last if any(v < 0 for v in growth.values()) else growth
        previous = total or previous
        if not call or not any(call.get(k) for k in CODEX_FIELDS):
            continue
        target.calls += 1
        target.input += call["input_tokens"] - call["cached_input_tokens"]
        target.cache_read += call["cached_input_tokens"]
        target.output += call["output_tokens"]
        target.agent_calls["main"] += 1


def _token_info(line: dict) -> dict | None:
    payload = line.get("payload")
    if line.get("type") != "event_msg" or not isinstance(payload, dict):
        return None
    if payload.get("type") != "token_count" or not isinstance(payload.get("info"), dict):
        return None
    return payload["info"]


# --- the product's rows and the comparison ---------------------------------------------------


def product_sessions(workspace) -> dict[tuple[str, str], dict]:
    """Per session: the Session row's counts and the same counted from the rows."""
    sessions = {}
    by_id = {}
    for row in Session.objects.filter(workspace=workspace).values():
        entry = {
            "id": row["id"],
            "call_count": row["call_count"],
            "agent_count": row["agent_count"],
            "compaction_count": row["compaction_count"],
            **{f"{name} tokens": row[f"{name}_tokens"] for name in CLASSES},
            "rows": Counter(),
            "agents": {},
        }
        sessions[(row["harness"], row["external_id"])] = entry
        by_id[row["id"]] = entry
    sums = {name: Sum(f"{name}_tokens") for name in CLASSES}
    for row in (
        Call.objects.filter(workspace=workspace)
        .values("session_id")
        .annotate(n=Count("id"), **sums)
    ):
        rows = by_id[row["session_id"]]["rows"]
        rows["calls"] = row["n"]
        for name in CLASSES:
            rows[f"{name} tokens"] = row[name] or 0
    agent_calls = dict(
        Call.objects.filter(workspace=workspace)
        .values("agent_id")
        .annotate(n=Count("id"))
        .values_list("agent_id", "n")
    )
    for agent_id, session_id, external_id in Agent.objects.filter(
        session__workspace=workspace
    ).values_list("id", "session_id", "external_id"):
        entry = by_id[session_id]
        entry["rows"]["agents"] += 1
        entry["agents"][external_id] = agent_calls.get(agent_id, 0)
    for row in (
        Compaction.objects.filter(session__workspace=workspace)
        .values("session_id")
        .annotate(n=Count("id"))
    ):
        by_id[row["session_id"]]["rows"]["compactions"] = row["n"]
    return sessions


def _difference(label: str, what: str, product: int, expected: int) -> str:
    change = f" ({(product - expected) / expected:+.1%})" if expected else ""
    return f"{label}: {what} product={product:,} reference={expected:,}{change}"


def session_mismatches(
    truth: CorpusTruth, workspace, harnesses=("claude-code", "codex")
) -> list[str]:
    product = {k: v for k, v in product_sessions(workspace).items() if k[0] in harnesses}
    problems = []
    for key in sorted(set(truth.sessions) | set(product)):
        label = f"{key[0]} session {key[1]}"
        expected, got = truth.sessions.get(key), product.get(key)
        if got is None:
            problems.append(
                f"{label}: missing from the product (reference: {expected.calls:,} calls)"
            )
            continue
        if expected is None:
            problems.append(f"{label}: in the product only ({got['call_count']:,} calls)")
            continue
        rows = got["rows"]
        checks = [
            ("call_count", got["call_count"], expected.calls),
            ("calls counted from rows", rows["calls"], expected.calls),
            ("agent_count", got["agent_count"], len(expected.working_agents)),
            ("agents counted from rows", rows["agents"], len(expected.agents)),
            (
                "compaction_count",
                got["compaction_count"],
                expected.compactions - expected.micro_compactions,
            ),
            ("compactions counted from rows", rows["compactions"], expected.compactions),
        ]
        for name in CLASSES:
            checks.append((f"{name} tokens", got[f"{name} tokens"], getattr(expected, name)))
            checks.append(
                (f"{name} tokens summed from rows", rows[f"{name} tokens"], getattr(expected, name))
            )
        notes = {
            "agent_count": f"; reference: main and {len(expected.agents) - 1} subagents",
            "compaction_count": f"; reference: {expected.micro_compactions} micro ones left out",
        }
        problems += [
            _difference(label, *check) + notes.get(check[0], "")
            for check in checks
            if check[1] != check[2]
        ]
        named = {a: n for a, n in expected.agent_calls.items() if not a.startswith(DERIVED)}
        named.update({a: named.get(a, 0) for a in expected.agents if not a.startswith(DERIVED)})
        for agent, calls in sorted(named.items()):
            if agent not in got["agents"]:
                problems.append(f"{label}: agent {agent} missing (reference: {calls:,} calls)")
            elif got["agents"][agent] != calls:
                problems.append(
                    _difference(label, f"calls of agent {agent}", got["agents"][agent], calls)
                )
        derived = sorted(
            expected.agent_calls.get(a, 0) for a in expected.agents if a.startswith(DERIVED)
        )
        others = sorted(n for a, n in got["agents"].items() if a not in named)
        if derived != others:
            problems.append(
                f"{label}: calls per unnamed subagent product={_brief(others)} "
                f"reference={_brief(derived)}"
            )
    return problems


def _brief(values: list[int]) -> str:
    """'N agents (K without calls), calls [a, b, …]' for the agents that have calls."""
    busy = [v for v in values if v]
    shown = ", ".join(str(v) for v in busy[:15]) + (", …" if len(busy) > 15 else "")
    return f"{len(values)} agents ({len(values) - len(busy)} without calls), calls [{shown}]"


def summary_mismatches(summary: IngestSummary, truth: CorpusTruth) -> list[str]:
    expected = {
        "files": truth.files,
        "sessions": truth.total("sessions"),
        "agents": truth.total("agents"),
        "calls": truth.total("calls"),
        "compactions": truth.total("compactions"),
        "duplicates_dropped": truth.usage_lines - truth.total("calls"),
        "malformed_lines": 0,
        **{name: truth.total(name) for name in CLASSES},
    }
    problems = [
        _difference("summary", name, getattr(summary, name), value)
        for name, value in expected.items()
        if getattr(summary, name) != value
    ]
    if summary.errors:
        problems.append(f"summary: errors {summary.errors[:5]}")
    return problems


def assert_matches(
    truth: CorpusTruth,
    workspace,
    summary: IngestSummary | None = None,
    *,
    more: list[str] = (),
    **kw,
):
    """Fail with every difference (the first 60 shown): `more`, the summary's, the rows'."""
    problems = list(more)
    if summary is not None:
        problems += summary_mismatches(summary, truth)
    problems += session_mismatches(truth, workspace, **kw)
    if problems:
        totals = ", ".join(
            f"{name} {truth.total(name):,}" for name in ("sessions", "agents", "calls")
        )
        shown = "\n".join(problems[:60])
        more = f"\n… and {len(problems) - 60} more" if len(problems) > 60 else ""
        pytest.fail(
            f"{len(problems)} differences from the reference ({totals}):\n{shown}{more}",
            pytrace=False,
        )


def ingest(workspace, root: Path, workers: int = 1) -> IngestSummary:
    return ingest_paths(
        workspace=workspace, paths=[str(root)], workers=workers, refresh_analytics=False
    )


# --- corpora ------------------------------------------------------------------------------------

CLAUDE_SHAPES = {
    "streamed": dict(
        sessions=4,
        calls_per_session=(1, 400),
        inline_sidechains=0,
        subagent_files=0,
        missing_request_id=0.2,
        final_count_missing=0.1,
        final_not_last=0.1,
        model_switch=0.1,
        resumed=0,
        compactions=0,
    ),
    "inline-mixed-agent-ids": dict(
        sessions=5, calls_per_session=(20, 300), inline_sidechains=1.0, task_rate=0.25,
        sidechain_echoes=0.1,
    ),
    "inline-no-agent-ids": dict(
        sessions=5, calls_per_session=(20, 300), inline_sidechains=1.0, task_rate=0.25,
        agent_id_on_sidechain_lines="none",
    ),
    "subagent-files": dict(
        sessions=5, calls_per_session=(20, 300), inline_sidechains=0, subagent_files=1.0,
        task_rate=0.25, compactions=0.03, sidechain_echoes=0.1, missing_message_id=0.05,
    ),
    "resumed-and-compacted": dict(
        sessions=8, projects=1, calls_per_session=(5, 200), resumed=0.8, compactions=0.06,
    ),
    "everything": dict(sessions=8, calls_per_session=(1, 250)),
}  # fmt: skip
SEEDS = (1, 2, 3)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", sorted(CLAUDE_SHAPES))
def test_claude_code_corpus_matches_the_reference(workspace, tmp_path, shape, seed):
    write_claude_corpus(tmp_path, seed=seed, **CLAUDE_SHAPES[shape])
    truth = reference([tmp_path])
    summary = ingest(workspace, tmp_path)
    assert_matches(truth, workspace, summary)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("forks", [0.0, 0.7], ids=["re-emits", "forks"])
def test_codex_corpus_matches_the_reference(workspace, tmp_path, seed, forks):
    write_codex_corpus(
        tmp_path, seed=seed, sessions=6, calls_per_session=(1, 400), forks=forks, compactions=0.03
    )
    truth = reference([tmp_path])
    assert truth.sessions, "the corpus holds no sessions"
    summary = ingest(workspace, tmp_path)
    assert_matches(truth, workspace, summary)


def test_the_same_folder_ingested_twice_adds_nothing(workspace, tmp_path):
    write_claude_corpus(tmp_path, seed=7, sessions=6, calls_per_session=(5, 200))
    write_codex_corpus(tmp_path, seed=7, sessions=3, calls_per_session=(5, 200))
    truth = reference([tmp_path])
    first = ingest(workspace, tmp_path)
    second = ingest(workspace, tmp_path)
    names = ("files", "sessions", "agents", "calls", "compactions", *CLASSES)
    added = [
        _difference("second ingest", f"{name} added", getattr(second, name), 0)
        for name in names
        if getattr(second, name)
    ]
    if second.skipped_files != truth.files:
        added.append(
            _difference("second ingest", "files skipped", second.skipped_files, truth.files)
        )
    assert_matches(truth, workspace, first, more=added)


def _cuts(path: Path) -> list[int]:
    """Line indexes at which to cut the file short. In a Claude Code file, only those
    between a call's placeholder line and a later line of the same call with a higher
    output count; in a Codex rollout, any line after a token count."""
    seen: dict[tuple, list[tuple[int, int]]] = {}
    codex_cuts = []
    for index, raw in enumerate(path.read_bytes().splitlines()):
        line = json.loads(raw)
        if _token_info(line):
            codex_cuts.append(index)
        message = line.get("message") or {}
        if line.get("type") == "assistant" and message.get("id") and "usage" in message:
            key = (message["id"], line.get("requestId"))
            seen.setdefault(key, []).append((index, message["usage"]["output_tokens"]))
    cuts = [
        index
        for lines in seen.values()
        for position, (index, output) in enumerate(lines)
        if any(later > output for _, later in lines[position + 1 :])
    ]
    return sorted(cuts) or codex_cuts


@pytest.mark.parametrize("seed", (4, 5))
def test_grown_files_update_the_calls_they_already_stored(workspace, tmp_path, seed):
    write_claude_corpus(
        tmp_path, seed=seed, sessions=8, calls_per_session=(10, 300), final_not_last=0.05,
        model_switch=0.05, interleave_results=0.7,
    )  # fmt: skip
    write_codex_corpus(tmp_path, seed=seed, sessions=3, calls_per_session=(10, 300))
    rng = random.Random(seed)
    whole = {path: path.read_bytes() for path in transcript_files([tmp_path])}
    candidates = [(path, cuts) for path in whole if (cuts := _cuts(path))]
    claude = [item for item in candidates if "projects" in item[0].parts]
    codex = [item for item in candidates if "sessions" in item[0].parts]
    chosen = rng.sample(claude, min(10, len(claude))) + rng.sample(codex, min(2, len(codex)))
    assert len(chosen) >= 7
    for path, cuts in chosen:
        lines = whole[path].splitlines(keepends=True)
        path.write_bytes(b"".join(lines[: rng.choice(cuts) + 1]))
    truncated = ingest(workspace, tmp_path)
    assert truncated.errors == []
    for path, data in whole.items():
        path.write_bytes(data)
    grown = ingest(workspace, tmp_path)
    assert grown.errors == []
    assert_matches(reference([tmp_path]), workspace)


def test_a_zip_of_the_folder_through_an_ingest_job(workspace, members, run_on_commit, tmp_path):
    root = tmp_path / "corpus"
    write_claude_corpus(root, seed=11, sessions=6, calls_per_session=(5, 250))
    write_codex_corpus(root, seed=11, sessions=3, calls_per_session=(5, 250))
    truth = reference([root])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            archive.write(path, path.relative_to(root).as_posix())
    with run_on_commit():
        job = trace_uploads_receive(
            workspace=workspace,
            user=members["editor"],
            files=[SimpleUploadedFile("corpus.zip", buffer.getvalue())],
            source=UploadSource.WEB,
        )
    job.refresh_from_db()
    assert (job.status, job.errors) == ("succeeded", []), job.error
    counts = [
        _difference("job", name, job.counts.get(name, 0), truth.total(name))
        for name in ("files", "sessions", "agents", "calls", "compactions")
        if job.counts.get(name, 0) != truth.total(name)
    ]
    assert_matches(truth, workspace, more=counts)


def _ingest_through_a_loader(workspace, root: Path, batch_size: int) -> IngestSummary:
    """The files of `root` through one TraceLoader with a small batch, as an upload's
    members go through one (see traces.services.ingestion._ingest_member)."""
    summary = IngestSummary()
    loader = TraceLoader(
        workspace=workspace, summary=summary, file_name="", batch_size=batch_size,
        derive_new_sessions=True,
    )  # fmt: skip
    for path in transcript_files([root]):
        sidecar_path = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
        sidecar = json.loads(sidecar_path.read_text()) if sidecar_path.exists() else None
        with open(path, "rb") as handle:
            detection = detect_format(path.name, handle)
            parser = make_parser(detection.format, path.name, sidecar)
            loader.file_name = path.name
            for record in parser.parse(detection.replay()):
                loader.feed(record)
    sessions_derive(session_ids=loader.finish())
    return summary


@pytest.mark.parametrize("batch_size", (7, 250))
def test_small_loader_batches_give_the_same_counts(workspace, tmp_path, batch_size):
    write_claude_corpus(tmp_path, seed=21, sessions=6, calls_per_session=(10, 400))
    write_codex_corpus(tmp_path, seed=21, sessions=2, calls_per_session=(10, 400))
    truth = reference([tmp_path])
    assert truth.total("calls") > 3 * batch_size
    _ingest_through_a_loader(workspace, tmp_path, batch_size)
    assert_matches(truth, workspace)


def _assert_crosses_the_boundaries(truth: CorpusTruth, *, calls: int) -> None:
    """The corpus really crosses the parser's and reader's limits."""
    assert truth.max_line_gap > 20_000, "no call waits over the 20,000-line window"
    assert truth.max_calls_spanned > 64, "no call outlasts the 64 pending calls"
    assert truth.files > 64, "fewer files than one CLI chunk holds"
    assert truth.max_file_bytes > 1 << 20 and truth.max_line_bytes > 1 << 20
    assert truth.total("calls") >= calls


def test_a_corpus_crossing_the_parser_windows_and_chunks(workspace, tmp_path):
    write_claude_corpus(
        tmp_path, seed=31, sessions=40, calls_per_session=(1, 60), inline_sidechains=0.2,
        subagent_files=1.0, task_rate=0.3, long_sidechains=1, huge_results=2,
    )  # fmt: skip
    truth = reference([tmp_path])
    _assert_crosses_the_boundaries(truth, calls=3_000)
    summary = ingest(workspace, tmp_path)
    assert_matches(truth, workspace, summary)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_thousand_calls_with_two_workers(workspace, tmp_path):
    write_claude_corpus(
        tmp_path, seed=2026, sessions=64, calls_per_session=(20, 3000), long_sidechains=2,
        huge_results=3,
    )  # fmt: skip
    write_codex_corpus(tmp_path, seed=2026, sessions=20, calls_per_session=(20, 3000))
    truth = reference([tmp_path])
    _assert_crosses_the_boundaries(truth, calls=50_000)
    summary = _ingest_with_the_cli(workspace, tmp_path, workers=2)
    assert_matches(truth, workspace, summary)


def _ingest_with_the_cli(workspace, root: Path, *, workers: int) -> IngestSummary:
    """`ingest_traces` in a process of its own, as users run it: its workers are forked
    from a process with no other thread (this one runs servers and browsers)."""
    database = connection.settings_dict
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    result = subprocess.run(
        [sys.executable, "manage.py", "ingest_traces", str(root), "--workspace", workspace.slug,
         "--workers", str(workers), "--json", "--no-analytics"],
        env={**os.environ, "DATABASE_URL": url}, capture_output=True, text=True, check=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    data = orjson.loads(result.stdout)
    tokens = data.pop("tokens")
    names = {item.name for item in dataclasses.fields(IngestSummary)}
    summary = IngestSummary(**{k: v for k, v in data.items() if k in names})
    for name, value in tokens.items():
        setattr(summary, name, value)
    return summary


def test_the_real_fixtures_match_the_reference(workspace, shared_fixtures):
    truth = reference([shared_fixtures])
    summary = ingest(workspace, shared_fixtures)
    assert summary.errors == []
    assert_matches(truth, workspace)


# --- the reference and the comparison, checked on their own -----------------------------------


def _write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _assistant(msg, out, *, req="r", sidechain=False, uuid=None, parent=None, **fields):
    usage = {"input_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    usage.update(fields.pop("usage", {}), output_tokens=out)
    message = {"id": msg, "model": fields.pop("model", "claude-x"), "usage": usage}
    if msg is None:
        del message["id"]
    line = {"type": "assistant", "sessionId": "s", "isSidechain": sidechain, "message": message}
    line.update(uuid=uuid, parentUuid=parent, **fields)
    if req is not None:
        line["requestId"] = req
    return line


def test_the_reference_counts_claude_code_by_the_rules(tmp_path):
    folder = tmp_path / "projects" / "p"
    _write(folder / "s.jsonl", [
        # streamed: placeholders, the final count, then a late placeholder
        _assistant("m1", 1), _assistant("m1", 120), _assistant("m1", 3),
        _assistant("m1", 7, req=None),  # no requestId: another call
        # a tie keeps the last line's counts; a breakdown of zeros falls back to the total
        _assistant("m2", 5, usage={"cache_read_input_tokens": 10}),
        _assistant("m2", 5, usage={"cache_read_input_tokens": 20, "cache_creation_input_tokens": 7,
                                   "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}}),
        _assistant("m3", 10, usage={"cache_creation_input_tokens": 100,
                                    "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 4}}),
        _assistant("e", 0, model="<synthetic>"),
        _assistant(None, 2), _assistant(None, 2),  # no message id: a call each
        # inline sidechains: agentId on some lines; a chain without any
        {"type": "user", "sessionId": "s", "isSidechain": True, "uuid": "c1", "parentUuid": None},
        _assistant("m4", 9, sidechain=True, uuid="c2", parent="c1", agentId="A"),
        {"type": "user", "sessionId": "s", "isSidechain": True, "uuid": "c3", "parentUuid": "c2"},
        _assistant("m5", 9, sidechain=True, uuid="c4", parent="c3"),
        {"type": "user", "sessionId": "s", "isSidechain": False, "uuid": "u1", "parentUuid": None},
        {"type": "user", "sessionId": "s", "isSidechain": True, "uuid": "d1", "parentUuid": "u1"},
        _assistant("m6", 9, sidechain=True, uuid="d2", parent="d1"),
        # compactions: a summary on its own, a boundary and its summary, a micro boundary
        {"type": "user", "sessionId": "s", "uuid": "b4", "parentUuid": "u1", "isCompactSummary": True},
        {"type": "system", "subtype": "compact_boundary", "sessionId": "s", "uuid": "b1"},
        {"type": "user", "sessionId": "s", "uuid": "b2", "parentUuid": "b1", "isCompactSummary": True},
        {"type": "system", "subtype": "microcompact_boundary", "sessionId": "s", "uuid": "b3"},
    ])  # fmt: skip
    _write(folder / "s" / "subagents" / "agent-x.jsonl", [
        _assistant("m3", 99, sidechain=True),  # a main-thread call seen on a sidechain
        _assistant("m7", 4, sidechain=True),
        {"type": "system", "subtype": "compact_boundary", "sessionId": "s", "uuid": "b1"},  # a copy
    ])  # fmt: skip
    truth = reference([tmp_path])
    session = truth.sessions[("claude-code", "s")]
    assert session.calls == 10  # m1 twice, m2, m3, two without ids, m4, m5, m6, m7
    assert session.output == 120 + 7 + 5 + 10 + 2 + 2 + 9 * 3 + 4
    assert (session.cache_read, session.cache_creation) == (20, 7 + 7)
    assert session.agent_calls == {"main": 6, "A": 2, "~d1": 1, "x": 1}
    assert session.agents == {"main", "A", "~d1", "x"}  # c1 started an agent without calls
    assert (session.compactions, session.micro_compactions) == (3, 1)
    assert truth.usage_lines == 14 and truth.max_line_gap == 2


def _token_count(stamp, total, last):
    return {"timestamp": stamp, "type": "event_msg", "payload": {"type": "token_count",
            "info": {"total_token_usage": total, "last_token_usage": last}}}  # fmt: skip


def _codex_usage(inp, cached, out):
    return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
            "reasoning_output_tokens": 0, "total_tokens": inp + out}  # fmt: skip


def test_the_reference_counts_codex_by_the_rules(tmp_path):
    first, grown = _codex_usage(100, 40, 10), _codex_usage(250, 100, 30)
    lowered = _codex_usage(50, 10, 5)
    _write(tmp_path / "sessions" / "rollout-a.jsonl", [
        {"type": "session_meta", "payload": {"id": "parent"}},
        _token_count("2026-01-01T00:00:01.000Z", first, first),
        _token_count("2026-01-01T00:00:02.000Z", first, first),  # re-emitted
        _token_count("2026-01-01T00:00:03.000Z", grown, _codex_usage(1, 1, 1)),  # growth counts
        {"type": "compacted", "payload": {"message": ""}},
        _token_count("2026-01-01T00:00:04.000Z", lowered, lowered),  # lower: the last usage
    ])  # fmt: skip
    spawn = {"subagent": {"thread_spawn": {"parent_thread_id": "parent"}}}
    _write(tmp_path / "sessions" / "rollout-b.jsonl", [
        {"type": "session_meta", "payload": {"id": "child", "source": spawn}},
        _token_count("2026-01-01T00:00:09.100Z", first, first),  # the parent's, replayed
        _token_count("2026-01-01T00:00:09.200Z", grown, grown),
        _token_count("2026-01-01T00:00:12.000Z", _codex_usage(300, 120, 40), None),
    ])  # fmt: skip
    truth = reference([tmp_path])
    parent, child = truth.sessions[("codex", "parent")], truth.sessions[("codex", "child")]
    assert (parent.calls, parent.input, parent.cache_read, parent.output) == (3, 60 + 90 + 40, 40 + 60 + 10, 10 + 20 + 5)  # fmt: skip
    assert parent.compactions == 1
    assert (child.calls, child.input, child.cache_read, child.output) == (1, 30, 20, 10)


def test_the_comparison_reports_a_changed_count(workspace, tmp_path):
    write_claude_corpus(tmp_path, seed=1, sessions=1, calls_per_session=(20, 20), **{
        k: v for k, v in CLAUDE_SHAPES["streamed"].items() if k not in {"sessions", "calls_per_session"}
    })  # fmt: skip
    truth = reference([tmp_path])
    ingest(workspace, tmp_path)
    assert session_mismatches(truth, workspace) == []
    (session_id,) = (key[1] for key in truth.sessions)
    call = Call.objects.filter(session__external_id=session_id).first()
    Call.objects.filter(pk=call.pk).update(output_tokens=call.output_tokens + 5)
    Session.objects.filter(external_id=session_id).update(agent_count=2)
    expected = truth.sessions[("claude-code", session_id)].output
    assert session_mismatches(truth, workspace) == [
        f"claude-code session {session_id}: agent_count product=2 reference=1 (+100.0%); "
        "reference: main and 0 subagents",
        f"claude-code session {session_id}: output tokens summed from rows "
        f"product={expected + 5:,} reference={expected:,} ({5 / expected:+.1%})",
    ]
