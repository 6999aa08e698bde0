"""Claude Code corpora of the shapes the trace benchmark measures. Pure: no Django.

Each writer lays files out as `~/.claude` does (`projects/<project>/<session>.jsonl`, and
`<session>/subagents/agent-<id>.jsonl` with its `.meta.json`), so that ccusage reads the
same folder through CLAUDE_CONFIG_DIR. Lines carry the fields real transcripts carry, with
millisecond timestamps (ccusage skips finer ones).

* shape b: long sessions; half run their Task subagents inline (`isSidechain`, the
  subagent's lines name it with `agentId` but its tool results do not); each message is
  streamed as 1-4 lines (a placeholder output count until the last), the results of its
  parallel tool calls interleaved with them; 6% of calls carry no `requestId`.
* shape c: many short subagent files (5-40 calls each) beside short main sessions.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

MODEL = "claude-sonnet-4-20250514"


class _Session:
    def __init__(self, rng: random.Random, session_id: str, start: datetime):
        self.rng = rng
        self.session_id = session_id
        self.clock = start
        self.count = 0

    def stamp(self) -> str:
        self.clock += timedelta(milliseconds=self.rng.randint(300, 9000))
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def base(self, kind: str, parent: str | None, *, sidechain=False, agent=None) -> dict:
        self.count += 1
        line = {
            "parentUuid": parent,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": "/home/dev/service",
            "sessionId": self.session_id,
            "version": "2.1.80",
            "gitBranch": "main",
            "type": kind,
            "uuid": f"{self.session_id[:8]}-{self.count:08x}-4000-8000-{self.rng.getrandbits(48):012x}",
            "timestamp": self.stamp(),
        }
        if agent:
            line["agentId"] = agent
        return line

    def prompt(self, text: str, parent, *, sidechain=False, agent=None) -> dict:
        line = self.base("user", parent, sidechain=sidechain, agent=agent)
        line["message"] = {"role": "user", "content": text}
        return line

    def call(
        self, out: list, parent, context: int, *, sidechain=False, agent=None, blocks=(1, 4),
        no_request_id=0.0, interleave=0.5, name: str,
    ) -> tuple[str, int]:  # fmt: skip
        """One streamed API call and its tool results; returns the last uuid and context."""
        rng = self.rng
        number = self.count
        message_id = f"msg_01{self.session_id[:8]}{number:010d}"
        request_id = (
            None if rng.random() < no_request_id else f"req_01{self.session_id[:8]}{number:010d}"
        )
        context += rng.randint(200, 3000)
        final = rng.randint(20, 2500)
        parts = rng.randint(*blocks)
        pending_results = []
        last = parent
        for part in range(parts):
            done = part == parts - 1
            if part == 0 and parts > 1:
                content = [{"type": "thinking", "thinking": "Let me look. " * 8, "signature": "x"}]
            elif not done and rng.random() < 0.5:
                content = [{"type": "text", "text": "I will read the module first. " * 3}]
            else:
                tool_id = f"toolu_01{self.session_id[:6]}{number:08d}{part}"
                path = f"/home/dev/service/src/mod_{rng.randint(0, 60)}.py"
                content = [
                    {"type": "tool_use", "id": tool_id, "name": name, "input": {"file_path": path}}
                ]
                pending_results.append(tool_id)
            line = self.base("assistant", last, sidechain=sidechain, agent=agent)
            if request_id:
                line["requestId"] = request_id
            line["message"] = {
                "id": message_id, "type": "message", "role": "assistant", "model": MODEL,
                "content": content, "stop_reason": "tool_use" if done else None, "stop_sequence": None,
                "usage": {
                    "input_tokens": 3, "cache_creation_input_tokens": 400,
                    "cache_read_input_tokens": context, "output_tokens": final if done else 1,
                    "service_tier": "standard",
                },
            }  # fmt: skip
            out.append(line)
            last = line["uuid"]
            if pending_results and not done and rng.random() < interleave:
                last = self._result(out, last, pending_results.pop(), sidechain)
        for tool_id in pending_results:
            last = self._result(out, last, tool_id, sidechain)
        return last, context

    def _result(self, out: list, parent: str, tool_id: str, sidechain: bool) -> str:
        # Tool results carry no agentId, even inside a subagent that names itself.
        line = self.base("user", parent, sidechain=sidechain)
        line["message"] = {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_id,
                    "content": "    def handle(self):\n" * 12,
                }
            ],
        }
        out.append(line)
        return line["uuid"]


def _session_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-8{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"


def _write(path: Path, lines: list[dict]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"\n".join(orjson.dumps(line) for line in lines) + b"\n"
    path.write_bytes(data)
    return len(data)


def write_shape_b(root: Path, *, sessions: int = 100, calls: int = 1000, seed: int = 2) -> dict:
    rng = random.Random(seed)
    start = datetime(2026, 10, 5, 8, tzinfo=UTC)
    info = {"files": 0, "lines": 0, "bytes": 0}
    for number in range(sessions):
        session = _Session(rng, _session_id(rng), start + timedelta(hours=7 * number))
        lines = [session.prompt("Please make the failing tests pass.", None)]
        last, context, made = lines[0]["uuid"], 18_000, 0
        inline = number % 2 == 0
        while made < calls:
            if inline and made and rng.random() < 0.04:
                agent = f"a{rng.getrandbits(40):010x}"
                task = f"toolu_task{session.count:08d}"
                step = session.base("assistant", last)
                step["requestId"] = f"req_task{session.session_id[:8]}{session.count:08d}"
                step["message"] = {
                    "id": f"msg_task{session.session_id[:8]}{session.count:08d}", "type": "message",
                    "role": "assistant", "model": MODEL, "stop_reason": "tool_use", "stop_sequence": None,
                    "content": [{"type": "tool_use", "id": task, "name": "Task", "input": {
                        "description": "Survey callers", "prompt": f"Survey the callers ({made}).",
                        "subagent_type": "general-purpose"}}],
                    "usage": {"input_tokens": 3, "cache_creation_input_tokens": 200,
                              "cache_read_input_tokens": context, "output_tokens": 160},
                }  # fmt: skip
                lines.append(step)
                made += 1
                side = session.prompt(
                    f"Survey the callers ({made - 1}).", None, sidechain=True, agent=agent
                )
                lines.append(side)
                side_last, side_context = side["uuid"], 14_000
                for _ in range(min(rng.randint(5, 40), max(0, calls - made))):
                    side_last, side_context = session.call(
                        lines, side_last, side_context, sidechain=True, agent=agent,
                        no_request_id=0.06, name="Grep",
                    )  # fmt: skip
                    made += 1
                result = session.base("user", step["uuid"])
                result["message"] = {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": task, "content": "Found 4 callers."}]}  # fmt: skip
                lines.append(result)
                last = result["uuid"]
                continue
            last, context = session.call(lines, last, context, no_request_id=0.06, name="Read")
            made += 1
            if context > 170_000:
                context = 40_000
        path = root / "projects" / "-home-dev-service" / f"{session.session_id}.jsonl"
        info["bytes"] += _write(path, lines)
        info["files"] += 1
        info["lines"] += len(lines)
    return info


def write_shape_c(root: Path, *, sessions: int = 100, files: int = 3000, seed: int = 3) -> dict:
    rng = random.Random(seed)
    start = datetime(2026, 10, 9, 8, tzinfo=UTC)
    info = {"files": 0, "lines": 0, "bytes": 0}
    per_session = files // sessions
    for number in range(sessions):
        session = _Session(rng, _session_id(rng), start + timedelta(hours=3 * number))
        project = root / "projects" / f"-home-dev-app{number % 4}"
        lines = [session.prompt("Review the module and fix what the reviewers flagged.", None)]
        last, context = lines[0]["uuid"], 16_000
        for _ in range(rng.randint(5, 15)):
            last, context = session.call(lines, last, context, blocks=(1, 3), name="Read")
        info["bytes"] += _write(project / f"{session.session_id}.jsonl", lines)
        info["lines"] += len(lines)
        info["files"] += 1
        for _ in range(per_session):
            agent = f"{rng.getrandbits(64):016x}"
            sub = [
                session.prompt("Find where the limit is read.", None, sidechain=True, agent=agent)
            ]
            sub_last, sub_context = sub[0]["uuid"], 12_000
            for _ in range(rng.randint(5, 40)):
                sub_last, sub_context = session.call(
                    sub,
                    sub_last,
                    sub_context,
                    sidechain=True,
                    agent=agent,
                    blocks=(1, 3),
                    name="Grep",
                )
            folder = project / session.session_id / "subagents"
            info["bytes"] += _write(folder / f"agent-{agent}.jsonl", sub)
            (folder / f"agent-{agent}.meta.json").write_bytes(
                orjson.dumps(
                    {"agentType": "Explore", "description": "Find the limit", "toolUseId": ""}
                )
            )
            info["lines"] += len(sub)
            info["files"] += 1
    return info
