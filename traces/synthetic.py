"""Synthetic Claude Code transcripts with planted, known parameters. Pure: no Django.

Used by the demo workspace, the ingest benchmark and the analytics tests. Each session
has a main agent whose context grows by `growth_at(C)` tokens per step, which makes the
cumulative cost of reaching context C scale as C^exponent (growth ∝ C^(2 − exponent)).
At `threshold` the session compacts to about `post_compaction` tokens and then spends
`rediscovery_steps` steps ingesting `rediscovery_factor`× its normal growth. Subagents
start fresh (about 12–30k) or, with `fork_share` probability, forked from the parent's
whole window. Every call is streamed as `lines_per_call` transcript lines (the
deduplication hazard), followed by its tool result.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import orjson

PROFILES = {
    # tool mix per task type: (weight, tool, input builder key)
    "building": [(5, "Edit"), (3, "Read"), (3, "Bash:pytest"), (1, "Bash:npm-test"), (1, "Grep")],
    "code_understanding": [(6, "Read"), (3, "Grep"), (2, "Glob"), (1, "Bash:git-log")],
    "research": [(4, "WebSearch"), (3, "WebFetch"), (1, "Read")],
    "qa": [
        (4, "mcp__playwright__browser_navigate"),
        (3, "mcp__playwright__browser_snapshot"),
        (2, "Bash:curl"),
        (1, "Read"),
    ],
    "pr_to_merge": [
        (3, "Bash:gh-pr"),
        (2, "Bash:git-push"),
        (2, "Read"),
        (1, "Edit"),
        (2, "Bash:gh-run"),
    ],
}
COMMANDS = {
    "Bash:pytest": "pytest -q tests/",
    "Bash:npm-test": "npm test -- --watch=false",
    "Bash:git-log": "git log --oneline -20",
    "Bash:curl": "curl -s http://localhost:8000/healthz",
    "Bash:gh-pr": "gh pr checks 412",
    "Bash:git-push": "git push origin feature/context-limits",
    "Bash:gh-run": "gh run watch",
}


@dataclass
class CorpusParams:
    sessions: int = 20
    steps_per_session: tuple[int, int] = (120, 420)
    start_context: tuple[int, int] = (14_000, 26_000)
    exponent: float = 2.55
    growth_at_100k: float = 2_000.0
    growth_noise: float = 0.25
    threshold: int = 180_000
    post_compaction: int = 60_000
    summary_tokens: int = 4_400
    rediscovery_steps: int = 25
    rediscovery_factor: float = 2.2
    subagents_per_session: tuple[int, int] = (1, 4)
    subagent_steps: tuple[int, int] = (8, 90)
    fork_share: float = 0.15
    lines_per_call: int = 2
    file_pool: int = 60
    seed: int = 7
    start: datetime = field(default_factory=lambda: datetime(2026, 10, 1, 8, 0, tzinfo=UTC))
    models: tuple[str, ...] = ("claude-sonnet-4-5", "claude-opus-4-1")
    projects: tuple[str, ...] = (
        "/home/dev/checkout-service",
        "/home/dev/web-app",
        "/home/dev/data-pipeline",
    )


def growth_at(context: float, params: CorpusParams) -> float:
    """Planted growth per step: D(C) = D(100k) · (C / 100k)^(2 − exponent)."""
    return params.growth_at_100k * (max(context, 1_000) / 100_000) ** (2 - params.exponent)


@dataclass
class GeneratedSession:
    session_id: str
    project: str
    lines: list[bytes]
    calls: int
    compactions: int
    subagents: int


class _Writer:
    def __init__(
        self,
        session_id: str,
        project: str,
        model: str,
        rng: random.Random,
        params: CorpusParams,
        clock: datetime,
    ):
        self.session_id = session_id
        self.project = project
        self.model = model
        self.rng = rng
        self.params = params
        self.clock = clock
        self.lines: list[bytes] = []
        self.calls = 0
        self.counter = 0

    def _tick(self, low: float = 4, high: float = 40) -> str:
        self.clock += timedelta(seconds=self.rng.uniform(low, high))
        # Claude Code writes milliseconds; ccusage skips lines with finer timestamps.
        return self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _line(self, data: dict) -> None:
        self.lines.append(orjson.dumps(data))

    def _base(self, kind: str, sidechain: bool, agent_id: str | None) -> dict:
        self.counter += 1
        base = {
            "type": kind,
            "sessionId": self.session_id,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": self.project,
            "gitBranch": "main",
            "version": "2.1.80",
            "uuid": f"{self.session_id[:8]}-{self.counter:08d}",
            "timestamp": self._tick(),
        }
        if agent_id:
            base["agentId"] = agent_id
        return base

    def prompt(self, text: str, *, sidechain=False, agent_id=None) -> None:
        self._line(
            {
                **self._base("user", sidechain, agent_id),
                "message": {"role": "user", "content": text},
            }
        )

    def call(
        self,
        context: int,
        growth: int,
        tool: str,
        *,
        sidechain=False,
        agent_id=None,
        tool_input=None,
    ) -> str:
        """One streamed API call plus its tool result; returns the tool_use id."""
        self.calls += 1
        message_id = f"msg_{self.session_id[:8]}_{self.calls:07d}"
        request_id = f"req_{self.session_id[:8]}_{self.calls:07d}"
        tool_id = f"toolu_{self.session_id[:8]}_{self.calls:07d}"
        cache_creation = max(0, growth)
        cache_read = max(0, context - cache_creation - 3)
        output = int(self.rng.lognormvariate(5.2, 0.6))
        name, payload = _tool_block(tool, self.rng, self.params, tool_input)
        for part in range(self.params.lines_per_call):
            last = part == self.params.lines_per_call - 1
            content = (
                [{"type": "tool_use", "id": tool_id, "name": name, "input": payload}]
                if last
                else [{"type": "text", "text": f"Working on step {self.calls}."}]
            )
            entry = {
                **self._base("assistant", sidechain, agent_id),
                "requestId": request_id,
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": content,
                    "stop_reason": "tool_use" if last else None,
                    "usage": {
                        "input_tokens": 3,
                        "cache_creation_input_tokens": cache_creation,
                        "cache_read_input_tokens": cache_read,
                        "output_tokens": output if last else 1,
                        "service_tier": "standard",
                    },
                },
            }
            self._line(entry)
        result = {
            **self._base("user", sidechain, agent_id),
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": _result_text(name, self.rng),
                    }
                ],
            },
        }
        self._line(result)
        return tool_id

    def compaction(self, pre: int, post: int) -> None:
        base = self._base("system", False, None)
        self._line(
            {
                **base,
                "parentUuid": None,
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "level": "info",
                "compactMetadata": {
                    "trigger": "auto",
                    "preTokens": pre,
                    "postTokens": post,
                    "durationMs": int(self.rng.uniform(60_000, 200_000)),
                },
            }
        )
        summary = (
            "This session is being continued from a previous conversation. "
            + "Summary detail. " * (self.params.summary_tokens // 4)
        )
        self._line(
            {
                **self._base("user", False, None),
                "isCompactSummary": True,
                "message": {"role": "user", "content": summary},
            }
        )


def _tool_block(
    tool: str, rng: random.Random, params: CorpusParams, override=None
) -> tuple[str, dict]:
    if override is not None:
        return tool, override
    path = f"src/module_{int(rng.paretovariate(1.2)) % params.file_pool:02d}.py"
    if tool.startswith("Bash:"):
        return "Bash", {"command": COMMANDS.get(tool, tool[5:]), "description": "run"}
    if tool in {"Read", "Edit", "Write"}:
        data = {"file_path": f"/repo/{path}"}
        if tool == "Edit":
            data.update(old_string="x = 1", new_string="x = 2")
        return tool, data
    if tool in {"Grep", "Glob"}:
        return tool, {"pattern": "def handle", "path": "/repo/src"}
    if tool == "WebSearch":
        return tool, {"query": "context window effective length benchmark"}
    if tool == "WebFetch":
        return tool, {"url": "https://example.org/docs", "prompt": "summarise"}
    return tool, {"url": "http://localhost:3000/checkout"}


def _result_text(name: str, rng: random.Random) -> str:
    if name == "Read":
        return "\n".join(f"{i:4d}  code line {i}" for i in range(1, rng.randint(20, 80)))
    if name == "Bash":
        return "collected 128 items\n" + "." * rng.randint(40, 120) + "\n128 passed in 4.2s"
    return "ok"


def _pick(profile: list[tuple[int, str]], rng: random.Random) -> str:
    total = sum(weight for weight, _ in profile)
    roll = rng.uniform(0, total)
    for weight, tool in profile:
        roll -= weight
        if roll <= 0:
            return tool
    return profile[-1][1]


def generate_session(index: int, params: CorpusParams) -> GeneratedSession:
    rng = random.Random(params.seed * 1_000_003 + index)
    session_id = f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-8{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
    project = params.projects[index % len(params.projects)]
    model = params.models[index % len(params.models)]
    writer = _Writer(
        session_id,
        project,
        model,
        rng,
        params,
        params.start + timedelta(hours=index * 5 + rng.uniform(0, 3)),
    )
    kinds = list(PROFILES)
    task = kinds[index % len(kinds)]
    writer.prompt(
        f"Task {index}: please work on the {task.replace('_', ' ')} of {project.rsplit('/', 1)[-1]}."
    )
    steps = rng.randint(*params.steps_per_session)
    context = float(rng.randint(*params.start_context))
    rediscovery_left = 0
    compactions = 0
    subagent_points = sorted(
        rng.sample(
            range(5, max(6, steps - 5)),
            k=min(rng.randint(*params.subagents_per_session), max(1, steps - 10)),
        )
    )
    subagents = 0
    for step in range(steps):
        if step and step % 60 == 0:
            task = rng.choice(kinds)  # the session moves on to another kind of work
        base = growth_at(context, params)
        growth = base * rng.lognormvariate(0, params.growth_noise)
        if rediscovery_left:
            growth *= params.rediscovery_factor
            rediscovery_left -= 1
        growth = int(max(200, growth))
        context += growth
        writer.call(int(context), growth, _pick(PROFILES[task], rng))
        if context >= params.threshold:
            post = int(params.post_compaction * rng.uniform(0.85, 1.15))
            writer.compaction(int(context), post)
            compactions += 1
            context = float(post)
            rediscovery_left = params.rediscovery_steps
        if step in subagent_points:
            subagents += 1
            _subagent(writer, rng, params, session_id, subagents, int(context))
    return GeneratedSession(session_id, project, writer.lines, writer.calls, compactions, subagents)


def _subagent(
    writer: _Writer,
    rng: random.Random,
    params: CorpusParams,
    session_id: str,
    number: int,
    parent_context: int,
) -> None:
    forked = rng.random() < params.fork_share
    agent_id = f"a{session_id[:6]}{number:02d}"
    prompt = f"Subagent {number}: survey the callers of handle() and report."
    writer.call(
        parent_context,
        0,
        "Task",
        tool_input={
            "description": f"Survey callers ({number})",
            "prompt": prompt,
            "subagent_type": "general-purpose",
        },
    )
    writer.prompt(prompt, sidechain=True, agent_id=agent_id)
    context = float(parent_context if forked else rng.randint(12_000, 30_000))
    steps = rng.randint(*params.subagent_steps)
    if rng.random() < 0.1:
        steps *= 4  # the heavy tail of single-directive subagents
    for _ in range(steps):
        growth = int(
            max(150, growth_at(context, params) * rng.lognormvariate(0, params.growth_noise))
        )
        context += growth
        writer.call(
            int(context),
            growth,
            _pick(PROFILES["code_understanding"], rng),
            sidechain=True,
            agent_id=agent_id,
        )


def generate_corpus(params: CorpusParams) -> Iterator[GeneratedSession]:
    for index in range(params.sessions):
        yield generate_session(index, params)
