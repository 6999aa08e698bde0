"""Generated Claude Code transcripts for instruction visibility, with an independent
reference counter: which calls' thinking holds the instruction, exactly or reworded, and
where it was delivered, are planted, so the expected counts follow from the plan alone.

Shapes: sessions of a main thread and 0–2 sidechain agents (named by `agentId`), 1–45 calls
an agent, calls streamed over 1–3 lines (a thinking block a line, repeated blocks once),
calls without a request id or without a message id (a call per line), blank thinking
blocks, calls without thinking, prompts and tool results that deliver the instruction."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

INSTRUCTION = "Never commit directly to main; open a pull request."
# Reworded forms whose normalised text holds the normalised instruction.
REWORDED = (
    INSTRUCTION.upper(),
    "**Never** commit directly to `main` -- open a *pull request*!",
    "never   commit directly to [main](https://example.com/main);\nopen a pull-request",
)
WORDS = [
    "parser",
    "tests",
    "fixture",
    "value",
    "branch",
    "cache",
    "index",
    "query",
    "table",
    "column",
    "handler",
]
BINS = [(0, 0), (1, 4), (5, 9), (10, 19), (20, 49), (50, 99), (100, 10**9)]


def _prose(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40))) + "."


@dataclass
class PlannedCall:
    prompt: str = ""
    prompt_delivers: bool = False
    result_delivers: bool = False
    thinking: list[tuple[str, str]] = field(default_factory=list)  # (text, "exact"/"reworded"/"")
    lines: int = 1
    request_id: bool = True
    message_id: bool = True


def plan(seed: int) -> dict[str, dict[str, list[PlannedCall]]]:
    """{session external id: {agent id: calls in order}}."""
    rng = random.Random(seed)
    sessions = {}
    for s in range(rng.randint(2, 4)):
        agents = {"main": []}
        for a in range(rng.choice([0, 1, 1, 2])):
            agents[f"agent{seed}{s}{a}"] = []
        for calls in agents.values():
            for _ in range(rng.choice([1, 3, 8, 20, 45])):
                call = PlannedCall()
                if rng.random() < 0.3:
                    call.prompt = _prose(rng)
                    if rng.random() < 0.2:
                        call.prompt += " Rule: " + rng.choice((INSTRUCTION, *REWORDED))
                        call.prompt_delivers = True
                for _ in range(rng.choice([0, 1, 1, 2, 3])):
                    draw = rng.random()
                    if draw < 0.15:
                        call.thinking.append((f"{_prose(rng)} {INSTRUCTION}", "exact"))
                    elif draw < 0.3:
                        call.thinking.append((f"{rng.choice(REWORDED)} {_prose(rng)}", "reworded"))
                    elif draw < 0.4:
                        call.thinking.append(("   \n", ""))
                    else:
                        call.thinking.append((_prose(rng), ""))
                if call.thinking and rng.random() < 0.2:
                    call.thinking.append(call.thinking[0])  # a streamed line repeats a block
                call.message_id = rng.random() > 0.08
                call.request_id = rng.random() > 0.2
                call.lines = min(max(1, len(call.thinking)), 3) if call.message_id else 1
                call.result_delivers = rng.random() < 0.05
                calls.append(call)
        sessions[f"gen-{seed}-{s}"] = agents
    return sessions


def transcripts(planned, cwd: str = "/work/generated") -> dict[str, bytes]:
    """One JSONL file a session, lines in time order, agents interleaved."""
    files = {}
    for external_id, agents in planned.items():
        clock = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
        per_agent = []
        for agent, calls in agents.items():
            per_agent.append([(agent, k, call) for k, call in enumerate(calls)])
        lines = []
        step = 0
        while any(per_agent):
            for queue in per_agent:
                if not queue:
                    continue
                agent, k, call = queue.pop(0)
                step += 1
                lines += _call_lines(external_id, agent, k, call, clock, step, cwd)
        files[external_id] = b"\n".join(json.dumps(line).encode() for line in lines) + b"\n"
    return files


def _call_lines(session, agent, k, call, clock, step, cwd) -> list[dict]:
    side = agent != "main"
    base = {"sessionId": session, "version": "2.1.89", "cwd": cwd, "userType": "external",
            "isSidechain": side, **({"agentId": agent} if side else {})}  # fmt: skip

    def stamp(offset: int) -> str:
        return (clock + timedelta(seconds=10 * step + offset)).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    out = []
    if call.prompt:
        out.append({**base, "type": "user", "uuid": f"p-{session}-{agent}-{k}", "timestamp": stamp(0),
                    "message": {"role": "user", "content": call.prompt}})  # fmt: skip
    blocks = [{"type": "thinking", "thinking": t, "signature": "x"} for t, _ in call.thinking]
    tool_id = f"toolu-{session}-{agent}-{k}"
    tail = [{"type": "text", "text": f"Step {k} done."}]
    if call.result_delivers:
        tail.append({"type": "tool_use", "id": tool_id, "name": "Read",
                     "input": {"file_path": "AGENTS.md"}})  # fmt: skip
    groups = [blocks[i :: call.lines] for i in range(call.lines)] if blocks else [[]]
    groups[-1] = groups[-1] + tail
    for part, content in enumerate(groups):
        message = {"type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                   "content": content, "stop_reason": "end_turn",
                   "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100,
                             "cache_read_input_tokens": 20_000 + 100 * k, "output_tokens": 40 + part}}  # fmt: skip
        if call.message_id:
            message["id"] = f"msg-{session}-{agent}-{k}"
        line = {**base, "type": "assistant", "uuid": f"a-{session}-{agent}-{k}-{part}",
                "timestamp": stamp(1), "message": message}  # fmt: skip
        if call.request_id:
            line["requestId"] = f"req-{session}-{agent}-{k}"
        out.append(line)
    if call.result_delivers:
        out.append({**base, "type": "user", "uuid": f"r-{session}-{agent}-{k}", "timestamp": stamp(2),
                    "message": {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": tool_id,
                         "content": f"# Rules\n- {INSTRUCTION}\n"}]}})  # fmt: skip
    return out


def _bin(turns: int) -> int:
    return next(i for i, (low, high) in enumerate(BINS) if low <= turns <= high)


def reference(planned) -> dict:
    """The expected counts, from the plan: overall, by session external id, by bin."""

    def tally():
        return {"n": 0, "without": 0, "blocks": 0, "exact": 0, "normalised": 0}

    overall, by_session, by_bin = tally(), {}, [tally() for _ in BINS]
    outside = 0
    for external_id, agents in planned.items():
        for calls in agents.values():
            delivered = None
            for k, call in enumerate(calls):
                if call.prompt_delivers:
                    delivered = k if delivered is None else min(delivered, k)
                if call.result_delivers and k + 1 < len(calls):
                    delivered = k + 1 if delivered is None else min(delivered, k + 1)
            for k, call in enumerate(calls):
                if delivered is None or k < delivered:
                    outside += 1
                    continue
                seen, kinds = [], []
                for text, kind in call.thinking:
                    if text.strip() and text not in seen:
                        seen.append(text)
                        kinds.append(kind)
                for t in (
                    overall,
                    by_session.setdefault(external_id, tally()),
                    by_bin[_bin(k - delivered)],
                ):
                    if not seen:
                        t["without"] += 1
                        continue
                    t["n"] += 1
                    t["blocks"] += len(seen)
                    t["exact"] += "exact" in kinds
                    t["normalised"] += bool({"exact", "reworded"} & set(kinds))
    return {"overall": overall, "by_session": by_session, "by_bin": by_bin, "outside": outside}


def as_tally(row: dict) -> dict:
    """A result row (API or selector) in the reference's shape."""
    return {
        "n": row["n"],
        "without": row["calls_without_thinking"],
        "blocks": row["thinking_blocks"],
        "exact": row["exact"]["count"],
        "normalised": row["normalised"]["count"],
    }
