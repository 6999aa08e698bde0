"""A planted corpus for behaviour after compaction: Claude Code transcripts whose correction
and tool-error counts by step since the compaction are known exactly.

Each session makes a few calls, compacts (auto or manual), then makes 150 calls, each
prompted by an operator message. At step s a fixed number of the group's sessions (chosen
by a seeded permutation per step) send a correction, and a fixed number of tool results
are errors. Messages the section must not count (commands, meta lines, the compaction
summary) carry correction phrases too.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

STEPS = 150
PRE_CALLS = 3
CORRECTION = "No, that's wrong: keep the old signature."
PLAIN = "Now update the tests for the parser."


def auto_shape(step: int) -> float:
    return 0.45 if step <= 5 else 0.30 if step <= 20 else 0.15


def manual_shape(step: int) -> float:
    return 0.60 if step <= 5 else 0.30 if step <= 20 else 0.15


TOOL_ERROR = 0.05


@dataclass
class Planted:
    sessions: dict[str, list[bytes]] = field(default_factory=dict)
    # (trigger, task_type) of each session, and per (session, step) the planted truth
    labels: dict[str, tuple[str, str]] = field(default_factory=dict)
    corrections: dict[tuple[str, int], bool] = field(default_factory=dict)
    errors: dict[tuple[str, int], bool] = field(default_factory=dict)

    def counts(self, steps: range, *, trigger=None, task_type=None, errors=False):
        """(hits, n) over sessions matching the labels, at the given steps."""
        table = self.errors if errors else self.corrections
        hits = n = 0
        for (session, step), hit in table.items():
            if step not in steps:
                continue
            t, k = self.labels[session]
            if (trigger and t != trigger) or (task_type and k != task_type):
                continue
            hits += hit
            n += 1
        return hits, n


def _chosen(rng: random.Random, sessions: list[str], share: float) -> set[str]:
    order = sessions[:]
    rng.shuffle(order)
    return set(order[: round(share * len(sessions))])


def plant(*, auto: int = 40, manual: int = 20, seed: int = 7) -> Planted:
    rng = random.Random(seed)
    names = [f"auto-{i:03d}" for i in range(auto)] + [f"manual-{i:03d}" for i in range(manual)]
    planted = Planted()
    for i, name in enumerate(names):
        planted.labels[name] = (
            "manual" if name.startswith("manual") else "auto",
            "building" if i % 2 == 0 else "code_understanding",
        )
    groups = {
        "auto": [n for n in names if n.startswith("auto")],
        "manual": [n for n in names if n.startswith("manual")],
    }
    shapes = {"auto": auto_shape, "manual": manual_shape}
    for trigger, members in groups.items():
        for step in range(1, STEPS + 1):
            hit = _chosen(rng, members, shapes[trigger](step))
            err = _chosen(rng, members, TOOL_ERROR)
            for name in members:
                if step % 10 != 3:  # those steps carry a command's output instead
                    planted.corrections[(name, step)] = name in hit
                planted.errors[(name, step)] = name in err
    for name in names:
        planted.sessions[name] = _transcript(name, planted)
    return planted


def _transcript(name: str, planted: Planted) -> list[bytes]:
    trigger, task_type = planted.labels[name]
    session_id = f"00000000-0000-4000-8000-{sorted(planted.labels).index(name):012d}"
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    lines: list[dict] = []
    clock = [start]
    counter = [0]

    def tick() -> str:
        clock[0] += timedelta(seconds=5)
        return clock[0].strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def uid() -> str:
        counter[0] += 1
        return f"{name}-{counter[0]:06d}"

    base = {
        "sessionId": session_id,
        "version": "2.1.89",
        "cwd": "/work/demo",
        "userType": "external",
        "isSidechain": False,
    }

    def user(content, **extra):
        lines.append(
            {
                **base,
                "type": "user",
                "uuid": uid(),
                "timestamp": tick(),
                "message": {"role": "user", "content": content},
                **extra,
            }
        )

    def call(context: int, is_error: bool):
        n = counter[0] + 1
        tool_id = f"toolu_{name}_{n}"
        tool = (
            {
                "type": "tool_use",
                "id": tool_id,
                "name": "Edit",
                "input": {"file_path": "/work/demo/a.py", "old_string": "a", "new_string": "b"},
            }
            if task_type == "building"
            else {
                "type": "tool_use",
                "id": tool_id,
                "name": "Read",
                "input": {"file_path": "/work/demo/a.py"},
            }
        )
        lines.append({
            **base, "type": "assistant", "uuid": uid(), "timestamp": tick(), "requestId": f"req_{name}_{n}",
            "message": {"id": f"msg_{name}_{n}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                        "content": [tool], "stop_reason": "tool_use",
                        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 500, "cache_read_input_tokens": context, "output_tokens": 40}},
        })  # fmt: skip
        user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_id,
                    "content": "Error: wrong" if is_error else "ok",
                    "is_error": is_error,
                }
            ]
        )

    context = 40_000
    for _ in range(PRE_CALLS):
        user("Please look at the parser.")
        call(context, False)
        context += 20_000
    lines.append({
        **base, "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": uid(),
        "parentUuid": None, "timestamp": tick(), "level": "info", "isMeta": False,
        "compactMetadata": {"trigger": trigger, "preTokens": context},
    })  # fmt: skip
    user(
        "This session is being continued from a previous conversation. You were wrong about X.",
        isCompactSummary=True,
        isVisibleInTranscriptOnly=True,
    )
    if trigger == "manual":
        user(
            "<command-name>/compact</command-name>\n<command-message>compact</command-message>\n<command-args>that's wrong</command-args>"
        )
    context = 20_000
    for step in range(1, STEPS + 1):
        if step % 10 == 3:
            # A local command's output in place of an operator message: not counted.
            user("<local-command-stdout>wrong: that's not right</local-command-stdout>")
        else:
            user(CORRECTION if planted.corrections[(name, step)] else PLAIN)
            if step % 7 == 0:
                user("Caveat: you forgot nothing. wrong", isMeta=True)
        call(context, planted.errors[(name, step)])
        context += 1_000
    return [json.dumps(line).encode() for line in lines]
