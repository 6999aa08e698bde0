"""Seeded generators of Claude Code and Codex transcript folders in many shapes.

Used by the differential ingestion tests and the benchmark. Pure Python, no Django. The
writers return nothing about what they wrote: whoever needs the true counts reads them
back from the files.
"""

from __future__ import annotations

import copy
import json
import math
import random
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

EPOCH = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
BASE62 = string.digits + string.ascii_letters
CLAUDE_MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805")
FALLBACK_MODEL = "claude-haiku-4-5-20251001"
INLINE_VERSIONS = ("1.0.72", "1.0.98", "1.0.108")
FILE_VERSIONS = ("2.0.28", "2.1.50", "2.1.63", "2.1.89")
TOOLS = ("Read", "Bash", "Edit", "Grep", "Glob", "Write")
AGENT_TYPES = ("Explore", "general-purpose", "Plan", "code-reviewer")
HUGE_RESULT_CHARS = 1_300_000  # longer than the 1 MiB read buffer
LONG_CHAIN_CALLS = 3_000  # at ≥ 3 streamed blocks each, over 20,000 lines
SYNTHETIC_MODEL = "<synthetic>"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _draw(rng: random.Random, bounds: tuple[int, int]) -> int:
    """An integer in [lo, hi], log-uniform, so that short and long sessions both occur."""
    lo, hi = bounds
    if hi <= lo:
        return lo
    return min(hi, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))


def _probability(value: float | bool) -> float:
    return float(value) if not isinstance(value, bool) else (1.0 if value else 0.0)


def _dump(path: Path, lines: Iterable[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False))
            handle.write("\n")


class _Ids:
    """Realistic-looking identifiers from the corpus's random generator."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.seen: set[str] = set()

    def _unique(self, make) -> str:
        while True:
            value = make()
            if value not in self.seen:
                self.seen.add(value)
                return value

    def _chars(self, n: int, alphabet: str = BASE62) -> str:
        return "".join(self.rng.choices(alphabet, k=n))

    def uuid(self) -> str:
        def make():
            h = f"{self.rng.getrandbits(128):032x}"
            return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

        return self._unique(make)

    def uuid7(self, moment: datetime) -> str:
        def make():
            ms = f"{int(moment.timestamp() * 1000):012x}"
            h = f"{self.rng.getrandbits(80):020x}"
            return f"{ms[:8]}-{ms[8:12]}-7{h[:3]}-8{h[3:6]}-{h[6:18]}"

        return self._unique(make)

    def message(self) -> str:
        return self._unique(lambda: "msg_01" + self._chars(22))

    def request(self) -> str:
        return self._unique(lambda: "req_011C" + self._chars(20))

    def tool(self) -> str:
        return self._unique(lambda: "toolu_01" + self._chars(22))

    def call(self) -> str:
        return self._unique(lambda: "call_" + self._chars(24))

    def hex(self, n: int) -> str:
        return self._unique(lambda: self._chars(n, "0123456789abcdef"))


# --- Claude Code -------------------------------------------------------------------------


@dataclass(eq=False)
class _ClaudeSession:
    session_id: str
    project: str
    cwd: str
    version: str
    branch: str
    kind: str  # plain | inline | files
    model: str
    budget: int
    long_chain: bool
    compact_style: str  # boundary | summary (1.0.x summary lines only)
    path: Path
    lines: list[dict] = field(default_factory=list)
    files: dict[Path, list[dict]] = field(default_factory=dict)
    metas: dict[Path, dict] = field(default_factory=dict)
    cuts: list[int] = field(default_factory=list)
    echoes: list[dict] = field(default_factory=list)
    huge_done: bool = False


@dataclass(eq=False)
class _Thread:
    """One agent's run of lines: the main thread, an inline sidechain or a subagent file."""

    session: _ClaudeSession
    out: list[dict]
    sidechain: bool
    agent_id: str | None = None
    id_style: str = "none"  # which lines carry agentId: none | all | assistant | random
    parent: str | None = None
    context: int = 20_000
    subagent_file: bool = False
    min_blocks: int = 1


class _ClaudeWriter:
    def __init__(self, root: Path, rng: random.Random, options: dict):
        self.root = root
        self.rng = rng
        self.o = options
        self.ids = _Ids(rng)
        self.now = EPOCH + timedelta(seconds=rng.uniform(0, 86_400))
        self.huge_left = options["huge_results"]
        self.interleave = _probability(options["interleave_results"])

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # -- the corpus ----------------------------------------------------------------------

    def write(self, sessions: int, projects: int) -> None:
        names = [f"{word}-{self.ids.hex(4)}" for word in ("alpha", "beta", "gamma", "delta")]
        names = [
            names[i % len(names)] + (f"-{i}" if i >= len(names) else "") for i in range(projects)
        ]
        written: dict[str, list[_ClaudeSession]] = {name: [] for name in names}
        for index in range(sessions):
            name = names[index % len(names)]
            session = self._new_session(name, index)
            earlier = [s for s in written[name] if s.cuts]
            if earlier and self.chance(self.o["resumed"]):
                self._copy_head(session, self.rng.choice(earlier))
            for thread, line in self._session(session):
                self.now += timedelta(milliseconds=self.rng.randint(20, 2500))
                line["timestamp"] = _stamp(self.now)
                thread.out.append(line)
            _dump(session.path, session.lines)
            for path, lines in session.files.items():
                _dump(path, lines)
            for path, meta in session.metas.items():
                path.write_text(json.dumps(meta), encoding="utf-8")
            session.lines, session.files, session.echoes = [], {}, []
            written[name].append(session)
            self.now += timedelta(minutes=self.rng.randint(5, 600))

    def _new_session(self, project: str, index: int) -> _ClaudeSession:
        long_chain = index < self.o["long_sidechains"]
        roll = self.rng.random()
        if long_chain or roll < self.o["inline_sidechains"]:
            kind = "inline"
        elif self.chance(self.o["subagent_files"]):
            kind = "files"
        else:
            kind = "plain"
        if kind == "inline":
            version = self.rng.choice(INLINE_VERSIONS)
        elif kind == "files":
            version = self.rng.choice(FILE_VERSIONS)
        else:
            version = self.rng.choice(INLINE_VERSIONS + FILE_VERSIONS)
        session_id = self.ids.uuid()
        folder = self.root / "projects" / f"-work-{project}"
        return _ClaudeSession(
            session_id=session_id,
            project=project,
            cwd=f"/work/{project}",
            version=version,
            branch=self.rng.choice(("main", "", "fix/ingest", "HEAD")),
            kind=kind,
            model=self.rng.choice(CLAUDE_MODELS),
            budget=LONG_CHAIN_CALLS if long_chain else _draw(self.rng, self.o["calls_per_session"]),
            long_chain=long_chain,
            compact_style="summary" if kind == "inline" and self.chance(0.5) else "boundary",
            path=folder / f"{session_id}.jsonl",
        )

    def _copy_head(self, session: _ClaudeSession, source: _ClaudeSession) -> None:
        """A resumed session: its file opens with a verbatim copy of the source's first units."""
        cut = self.rng.choice(source.cuts)
        with open(source.path, encoding="utf-8") as handle:
            head = [json.loads(line) for _, line in zip(range(cut), handle, strict=False)]
        session.lines.extend(head)
        session.cuts.append(len(head))

    # -- threads and lines ---------------------------------------------------------------

    def _session(self, s: _ClaudeSession) -> Iterator[tuple[_Thread, dict]]:
        main = _Thread(s, s.lines, sidechain=False, context=self.rng.randint(12_000, 40_000))
        if s.lines:
            main.parent = s.lines[-1].get("uuid")
        yield main, self._user(main, "Please look into the failing ingestion counts")
        first = True
        while s.budget > 0:
            if self.chance(0.08):
                yield main, self._user(main, "Now continue with the next part")
            if not first and self.chance(self.o["compactions"]):
                yield from self._compaction(main)
            if self.chance(self.o["synthetic"]):
                yield main, self._synthetic(main)
            yield from self._call(main, long_task=first and s.long_chain)
            first = False
            s.cuts.append(len(s.lines))

    def _base(self, thread: _Thread, kind: str, *, root: bool = False) -> dict:
        s = thread.session
        line = {
            "parentUuid": thread.parent,
            "isSidechain": thread.sidechain,
            "userType": "external",
            "cwd": s.cwd,
            "sessionId": s.session_id,
            "version": s.version,
            "gitBranch": s.branch,
        }
        style = thread.id_style
        if thread.agent_id and (
            style == "all"
            or (style == "assistant" and kind == "assistant")
            or (style == "random" and (root or self.chance(0.5)))
        ):
            line["agentId"] = thread.agent_id
        return line

    def _finish(self, thread: _Thread, line: dict) -> dict:
        line["uuid"] = self.ids.uuid()
        thread.parent = line["uuid"]
        return line

    def _user(self, thread: _Thread, text, *, root: bool = False, **extra) -> dict:
        line = self._base(thread, "user", root=root)
        line["type"] = "user"
        line["message"] = {"role": "user", "content": text}
        line.update(extra)
        return self._finish(thread, line)

    def _usage(self, thread: _Thread) -> dict:
        rng = self.rng
        thread.context += rng.randint(200, 4_000)
        inp = rng.choice((1, 2, 3, 4, 6, 8)) if self.chance(0.85) else rng.randint(10, 3_000)
        created = rng.randint(0, 6_000) if self.chance(0.7) else 0
        read = max(0, thread.context - created - inp)
        usage = {
            "input_tokens": inp,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
        }
        shape = rng.random()
        if shape < 0.55:
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": created,
                "ephemeral_1h_input_tokens": 0,
            }
        elif shape < 0.7:
            hour = rng.randint(0, created)
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": created - hour,
                "ephemeral_1h_input_tokens": hour,
            }
        elif shape < 0.8:  # a breakdown of zeros beside a non-zero total
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": 0,
                "ephemeral_1h_input_tokens": 0,
            }
        elif shape < 0.82:  # a breakdown that disagrees with the total
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": created + rng.randint(1, 500),
                "ephemeral_1h_input_tokens": rng.randint(0, 300),
            }
        usage["output_tokens"] = 0
        usage["service_tier"] = "standard"
        return usage

    def _block(self, kind: str, thread: _Thread) -> dict:
        rng = self.rng
        if kind == "text":
            return {
                "type": "text",
                "text": rng.choice(("Let me check.", "Done.", "Looking at it now.")),
            }
        if kind == "thinking":
            return {"type": "thinking", "thinking": "Consider the counts.", "signature": "sig"}
        if kind in ("task", "long_task"):
            return {
                "type": "tool_use",
                "id": self.ids.tool(),
                "name": "Task",
                "input": {
                    "description": "Survey the module",
                    "prompt": "Read the parser and report what it does with streamed lines.",
                    "subagent_type": rng.choice(AGENT_TYPES),
                },
            }
        name = rng.choice(TOOLS)
        if name == "Bash":
            tool_input = {
                "command": rng.choice(("pytest -q", "git status", "ls -la")),
                "description": "run",
            }
        elif name in ("Grep", "Glob"):
            tool_input = {"pattern": "def parse", "path": "/work/src"}
        else:
            tool_input = {"file_path": f"/work/src/module_{rng.randint(0, 40)}.py"}
        if name in ("Edit", "Write"):
            tool_input["old_string" if name == "Edit" else "content"] = "x = 1"
        return {"type": "tool_use", "id": self.ids.tool(), "name": name, "input": tool_input}

    def _plan(self, n: int, thread: _Thread, long_task: bool) -> list[str]:
        s = thread.session
        plan = []
        for i in range(n):
            if i == 0 and (self.chance(0.6) if n > 1 else self.chance(0.5)):
                plan.append(self.rng.choice(("text", "text", "thinking")))
            elif (
                not thread.sidechain
                and s.kind != "plain"
                and s.budget > 1
                and self.chance(self.o["task_rate"])
            ):
                plan.append("task")
            else:
                plan.append("tool")
        if long_task:
            plan = ["text", "long_task", *(["tool"] * max(1, n - 2))]
        return plan

    def _outputs(self, n: int) -> list[int]:
        """Streamed output counts: placeholders, then the final count on the last line(s)."""
        rng = self.rng
        placeholder = rng.choice((1, 3))
        final = rng.randint(8, 2_400) if self.chance(0.95) else rng.randint(2_400, 32_000)
        outputs = [placeholder] * n
        if self.chance(self.o["final_count_missing"]):
            return outputs
        if n > 1 and self.chance(self.o["final_not_last"]):
            outputs[rng.randrange(n - 1)] = final
        elif self.chance(0.3):
            for i in range(rng.randrange(n), n):
                outputs[i] = final
        else:
            outputs[-1] = final
        return outputs

    def _call(self, thread: _Thread, *, long_task: bool = False) -> Iterator[tuple[_Thread, dict]]:
        rng, s = self.rng, thread.session
        s.budget -= 1
        lo, hi = self.o["blocks"]
        floor = 3 if long_task else thread.min_blocks
        lo, hi = max(floor, lo), max(floor, hi)
        n = rng.randint(lo, hi)
        plan = self._plan(n, thread, long_task)
        n = len(plan)
        message_id = self.ids.message()
        request_id = None if self.chance(self.o["missing_request_id"]) else self.ids.request()
        switch = self.chance(self.o["model_switch"])
        base_usage = self._usage(thread)
        outputs = self._outputs(n)
        interleave = long_task or self.chance(self.interleave)
        if thread.sidechain and s.echoes and self.chance(0.4):
            yield thread, self._echo(thread, s.echoes.pop(0))
        blocks = [self._block(kind, thread) for kind in plan]
        lines = []
        for i, block in enumerate(blocks):
            usage = self._usage(thread) if switch and i else copy.deepcopy(base_usage)
            usage["output_tokens"] = outputs[i]
            last = i == n - 1
            line = self._base(thread, "assistant")
            line["message"] = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": FALLBACK_MODEL if switch and i % 2 else s.model,
                "content": [block],
                "stop_reason": ("tool_use" if block["type"] == "tool_use" else "end_turn")
                if last
                else None,
                "stop_sequence": None,
                "usage": usage,
            }
            if request_id is not None:
                line["requestId"] = request_id
            line["type"] = "assistant"
            self._finish(thread, line)
            lines.append(line)
            yield thread, line
            if interleave and block["type"] == "tool_use":
                yield from self._tool(thread, line, block, plan[i])
        if not interleave:
            tools = [(line, b, k) for line, b, k in zip(lines, blocks, plan, strict=True)]
            plain = [t for t in tools if t[2] == "tool"]
            tasks = [t for t in tools if t[2] in ("task", "long_task")]
            rng.shuffle(plain)
            for line, block, _ in plain:
                yield thread, self._result(thread, line, block)
            yield from self._interleaved(
                [self._subagent(thread, line, block, kind) for line, block, kind in tasks]
            )
            for line, block, _ in tasks:
                yield thread, self._result(thread, line, block)
        if not thread.sidechain and self.chance(self.o["sidechain_echoes"]):
            s.echoes.append(max(lines, key=lambda ln: ln["message"]["usage"]["output_tokens"]))

    def _interleaved(self, runs: list[Iterator]) -> Iterator:
        """Lines of parallel subagents, interleaved at random (each keeps its own order)."""
        live = list(runs)
        while live:
            run = live[self.rng.randrange(len(live))]
            try:
                yield next(run)
            except StopIteration:
                live.remove(run)

    def _tool(self, thread, line, block, kind) -> Iterator[tuple[_Thread, dict]]:
        if kind in ("task", "long_task"):
            yield from self._subagent(thread, line, block, kind)
        yield thread, self._result(thread, line, block)

    def _result(self, thread: _Thread, tool_line: dict, block: dict) -> dict:
        s = thread.session
        content = f"output of {block['name']} ({self.rng.randint(1, 999)} lines)"
        if self.huge_left and not s.huge_done:
            content = "x" * HUGE_RESULT_CHARS
            self.huge_left -= 1
            s.huge_done = True
        line = self._base(thread, "user")
        line["parentUuid"] = tool_line["uuid"]
        line["type"] = "user"
        line["message"] = {
            "role": "user",
            "content": [
                {
                    "tool_use_id": block["id"],
                    "type": "tool_result",
                    "content": content,
                    "is_error": False,
                }
            ],
        }
        line["toolUseResult"] = {"stdout": content[:200], "stderr": "", "interrupted": False}
        return self._finish(thread, line)

    def _synthetic(self, thread: _Thread) -> dict:
        line = self._base(thread, "assistant")
        line["message"] = {
            "id": self.ids.uuid(),
            "model": SYNTHETIC_MODEL,
            "role": "assistant",
            "stop_reason": "stop_sequence",
            "stop_sequence": "",
            "type": "message",
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
            "content": [{"type": "text", "text": "API Error: 529 overloaded"}],
        }
        line["type"] = "assistant"
        line["isApiErrorMessage"] = True
        return self._finish(thread, line)

    def _echo(self, thread: _Thread, source: dict) -> dict:
        """A sidechain copy of a main-thread call's line, with a higher output count."""
        line = self._base(thread, "assistant")
        line["message"] = copy.deepcopy(source["message"])
        line["message"]["usage"]["output_tokens"] += self.rng.randint(1, 400)
        if "requestId" in source:
            line["requestId"] = source["requestId"]
        line["type"] = "assistant"
        return self._finish(thread, line)

    # -- subagents -------------------------------------------------------------------------

    def _subagent(self, parent: _Thread, tool_line: dict, block: dict, kind: str) -> Iterator:
        rng, s, o = self.rng, parent.session, self.o
        if kind == "long_task":
            calls = max(1, s.budget - 3)
        else:
            calls = max(1, min(_draw(rng, o["sidechain_calls"]), s.budget))
        prompt = block["input"]["prompt"]
        if s.kind == "inline":
            mode = o["agent_id_on_sidechain_lines"]
            style = mode if mode != "mixed" else rng.choice(("none", "all", "assistant", "random"))
            roll = rng.random()
            root_parent = (
                None if roll < 0.7 else (tool_line["uuid"] if roll < 0.9 else self.ids.uuid())
            )
            thread = _Thread(
                s,
                s.lines,
                sidechain=True,
                agent_id=None if style == "none" else "a" + self.ids.hex(7),
                id_style=style,
                parent=root_parent,
                context=rng.randint(6_000, 20_000),
            )
        else:
            agent_id = "a" + self.ids.hex(7)
            layout = o["subagent_layout"]
            if layout == "both":
                layout = rng.choice(("new", "old"))
            folder = (
                s.path.parent / s.session_id / "subagents" if layout == "new" else s.path.parent
            )
            path = folder / f"agent-{agent_id}.jsonl"
            if layout == "new" and self.chance(0.7):
                s.metas[folder / f"agent-{agent_id}.meta.json"] = {
                    "agentType": block["input"]["subagent_type"],
                    "description": block["input"]["description"],
                    "toolUseId": block["id"],
                }
            thread = _Thread(
                s,
                s.files.setdefault(path, []),
                sidechain=True,
                agent_id=agent_id,
                id_style="all" if self.chance(0.9) else "none",
                context=rng.randint(6_000, 20_000),
                subagent_file=True,
            )
        if kind == "long_task":
            thread.min_blocks = 3  # so that its lines outnumber the parser's line window
        yield thread, self._user(thread, prompt, root=True)
        for index in range(calls):
            if thread.subagent_file and index and self.chance(o["compactions"] * 3):
                yield from self._compaction(thread)
            if thread.subagent_file and self.chance(o["missing_message_id"]):
                yield thread, self._no_message_id(thread)
            yield from self._call(thread)

    def _no_message_id(self, thread: _Thread) -> dict:
        line = self._base(thread, "assistant")
        usage = self._usage(thread)
        usage["output_tokens"] = self.rng.randint(5, 400)
        line["message"] = {
            "type": "message",
            "role": "assistant",
            "model": thread.session.model,
            "content": [{"type": "text", "text": "partial"}],
            "usage": usage,
        }
        line["type"] = "assistant"
        return self._finish(thread, line)

    # -- compactions -----------------------------------------------------------------------

    def _compaction(self, thread: _Thread) -> Iterator[tuple[_Thread, dict]]:
        rng, s = self.rng, thread.session
        pre = thread.context + rng.randint(0, 5_000)
        thread.context = rng.randint(8_000, 30_000)
        summary_text = "This session is being continued from a previous conversation. " * 20
        if s.compact_style == "summary" and not thread.sidechain:
            yield (
                thread,
                self._user(
                    thread, summary_text, isCompactSummary=True, isVisibleInTranscriptOnly=True
                ),
            )
            return
        if self.chance(0.3):
            line = self._base(thread, "system")
            line.update(
                parentUuid=None,
                logicalParentUuid=thread.parent,
                type="system",
                subtype="microcompact_boundary",
                content="Context microcompacted",
                isMeta=False,
                level="info",
                microcompactMetadata={
                    "trigger": "auto",
                    "preTokens": pre,
                    "tokensSaved": rng.randint(1_000, 20_000),
                    "compactedToolIds": [self.ids.tool()],
                    "clearedAttachmentUUIDs": [],
                },
            )
            yield thread, self._finish(thread, line)
            return
        trigger = "manual" if self.chance(0.3) else "auto"
        if trigger == "manual":
            yield (
                thread,
                self._user(
                    thread, "<command-name>/compact</command-name>\n<command-args></command-args>"
                ),
            )
        if s.kind == "files" and not thread.sidechain and self.chance(0.5):
            yield from self._compaction_agent(thread)
        line = self._base(thread, "system")
        line.update(
            parentUuid=None,
            logicalParentUuid=thread.parent,
            type="system",
            subtype="compact_boundary",
            content="Conversation compacted",
            isMeta=False,
            level="info",
            compactMetadata={"trigger": trigger, "preTokens": pre},
        )
        yield thread, self._finish(thread, line)
        yield (
            thread,
            self._user(thread, summary_text, isCompactSummary=True, isVisibleInTranscriptOnly=True),
        )

    def _compaction_agent(self, main: _Thread) -> Iterator[tuple[_Thread, dict]]:
        """The summariser's own call, in subagents/agent-acompact-<id>.jsonl (2.1.x)."""
        s = main.session
        agent_id = "acompact-" + self.ids.hex(16)
        path = s.path.parent / s.session_id / "subagents" / f"agent-{agent_id}.jsonl"
        thread = _Thread(
            s,
            s.files.setdefault(path, []),
            sidechain=True,
            agent_id=agent_id,
            id_style="all",
            context=main.context,
            subagent_file=True,
        )
        yield thread, self._user(thread, "Summarise the conversation so far.", root=True)
        yield from self._call(thread)


def write_claude_corpus(
    root: Path,
    *,
    seed: int,
    sessions: int = 6,
    projects: int = 2,
    calls_per_session: tuple[int, int] = (1, 80),
    blocks: tuple[int, int] = (1, 6),
    interleave_results: float | bool = 0.5,
    inline_sidechains: float = 0.5,
    agent_id_on_sidechain_lines: str = "mixed",
    subagent_files: float = 0.5,
    subagent_layout: str = "both",
    sidechain_calls: tuple[int, int] = (1, 30),
    task_rate: float = 0.1,
    missing_request_id: float = 0.06,
    missing_message_id: float = 0.003,
    final_count_missing: float = 0.03,
    final_not_last: float = 0.02,
    model_switch: float = 0.01,
    compactions: float = 0.01,
    resumed: float = 0.25,
    sidechain_echoes: float = 0.02,
    synthetic: float = 0.005,
    long_sidechains: int = 0,
    huge_results: int = 0,
) -> None:
    """Write `sessions` Claude Code sessions under `root`/projects/-work-<project>/.

    * calls_per_session: calls of a session (main thread and its subagents together),
      drawn log-uniformly; `blocks`: streamed lines (content blocks) per call.
    * interleave_results: probability (or True/False) that a call's tool_result lines sit
      between its streamed blocks instead of after the last one.
    * inline_sidechains: share of sessions written as 1.0.x, with Task subagents inline
      (`isSidechain`); agent_id_on_sidechain_lines: none | all | mixed (per chain: none,
      all, assistant lines only, or each line at random).
    * subagent_files: share of the other sessions whose subagents get their own files,
      in the new (`<session>/subagents/`), old (beside the session) or both layouts.
    * missing_request_id / missing_message_id / final_count_missing / final_not_last /
      model_switch: per-call probabilities of those quirks (a fallback model mid-stream
      gives each line its own model and cache counts).
    * compactions: per-call probability of a compaction (auto or manual boundary with
      its summary line, micro boundaries, 1.0.x summary-only lines, acompact files).
    * resumed: probability that a session opens with a verbatim copy of an earlier
      session's head. sidechain_echoes: probability that a main-thread call reappears
      on a sidechain line with a higher output count.
    * long_sidechains: that many sessions of 3,000 calls run one inline subagent taking
      almost all of them between two streamed blocks of one main-thread call.
    * huge_results: that many tool results longer than 1 MiB.
    """
    if agent_id_on_sidechain_lines not in {"none", "all", "mixed"}:
        raise ValueError("agent_id_on_sidechain_lines must be none, all or mixed")
    if subagent_layout not in {"new", "old", "both"}:
        raise ValueError("subagent_layout must be new, old or both")
    options = {
        k: v for k, v in locals().items() if k not in {"root", "seed", "sessions", "projects"}
    }
    writer = _ClaudeWriter(Path(root), random.Random(seed), options)
    writer.write(sessions, projects)


# --- Codex -------------------------------------------------------------------------------

USAGE_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def _usage_sum(a: dict, b: dict) -> dict:
    total = {k: a[k] + b[k] for k in USAGE_FIELDS}
    total["total_tokens"] = total["input_tokens"] + total["output_tokens"]
    return total


ZERO_USAGE = dict.fromkeys((*USAGE_FIELDS, "total_tokens"), 0)


class _CodexWriter:
    def __init__(self, root: Path, rng: random.Random, options: dict):
        self.root = root
        self.rng = rng
        self.o = options
        self.ids = _Ids(rng)
        self.now = EPOCH

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def tick(self, lo: float = 0.05, hi: float = 4.0) -> str:
        self.now += timedelta(seconds=self.rng.uniform(lo, hi))
        return _stamp(self.now)

    def _path(self, moment: datetime, session_id: str) -> Path:
        return (
            self.root
            / "sessions"
            / f"{moment:%Y}"
            / f"{moment:%m}"
            / f"{moment:%d}"
            / f"rollout-{moment:%Y-%m-%dT%H-%M-%S}-{session_id}.jsonl"
        )

    def _meta(self, session_id: str, moment: datetime, source) -> dict:
        return {
            "timestamp": _stamp(moment),
            "type": "session_meta",
            "payload": {
                "id": session_id,
                "timestamp": _stamp(moment),
                "cwd": "/work/repo",
                "originator": "codex_cli_rs",
                "cli_version": "0.104.0",
                "source": source,
                "model_provider": "openai",
                "base_instructions": {"text": "You are Codex."},
                "git": {"commit_hash": self.ids.hex(40), "branch": "main"},
            },
        }

    def _event(self, payload: dict) -> dict:
        return {"timestamp": self.tick(), "type": "event_msg", "payload": payload}

    def _item(self, payload: dict) -> dict:
        return {"timestamp": self.tick(), "type": "response_item", "payload": payload}

    def _turn(self, model: str) -> list[dict]:
        turn_id = self.ids.uuid7(self.now)
        return [
            self._event(
                {"type": "task_started", "turn_id": turn_id, "model_context_window": 258400}
            ),
            self._item(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "go on"}],
                }
            ),
            self._event({"type": "user_message", "message": "go on", "images": []}),
            {
                "timestamp": self.tick(),
                "type": "turn_context",
                "payload": {
                    "turn_id": turn_id,
                    "cwd": "/work/repo",
                    "model": model,
                    "effort": "high",
                },
            },
        ]

    def _token_count(self, total: dict | None, last: dict | None) -> dict:
        info = None
        if total is not None or last is not None:
            info = {
                "total_token_usage": total,
                "last_token_usage": last,
                "model_context_window": 258400,
            }
        return self._event(
            {
                "type": "token_count",
                "info": info,
                "rate_limits": {"primary": {"used_percent": 10.0, "window_minutes": 300}},
            }
        )

    def _usage(self, context: int) -> dict:
        rng = self.rng
        cached = int(context * rng.uniform(0.4, 0.98)) if self.chance(0.9) else 0
        output = rng.randint(20, 3_000)
        reasoning = rng.randint(0, output)
        return {
            "input_tokens": context,
            "cached_input_tokens": cached,
            "output_tokens": output,
            "reasoning_output_tokens": reasoning,
            "total_tokens": context + output,
        }

    def _calls(
        self, lines: list[dict], count: int, totals: dict, *, compactions: bool, model: str
    ) -> Iterator[dict]:
        """Append `count` calls to `lines`; yields the running totals after each call."""
        rng, o = self.rng, self.o
        context = rng.randint(8_000, 30_000)
        lower_next = False
        last = None
        for index in range(count):
            if index and compactions and self.chance(o["compactions"]):
                marker = {**ZERO_USAGE, "total_tokens": totals["total_tokens"] + 900_000}
                lines.append(self._token_count(dict(totals), marker))
                lines.append(
                    {
                        "timestamp": self.tick(),
                        "type": "compacted",
                        "payload": {
                            "message": "",
                            "replacement_history": [
                                {"type": "message", "role": "user", "content": []},
                                {"type": "compaction", "encrypted_content": "gAAA"},
                            ],
                        },
                    }
                )
                lines.append(self._event({"type": "context_compacted"}))
                lines.extend(self._turn(model)[3:])
                lines.append(self._token_count(dict(totals), last))
                context = rng.randint(8_000, 40_000)
                lower_next = self.chance(o["lowered_totals"])
            if index and self.chance(0.12):
                lines.append(self._event({"type": "task_complete", "last_agent_message": "ok"}))
                lines.extend(self._turn(model))
            context = min(250_000, context + rng.randint(300, 9_000))
            usage = self._usage(context)
            if self.chance(0.6):
                lines.append(self._event({"type": "agent_reasoning", "text": "Thinking."}))
                lines.append(
                    self._item({"type": "reasoning", "summary": [], "encrypted_content": "gAAA"})
                )
            call_id = self.ids.call()
            if self.chance(0.75):
                lines.append(
                    self._item(
                        {
                            "type": "function_call",
                            "name": "exec_command",
                            "arguments": json.dumps({"cmd": "pytest -q"}),
                            "call_id": call_id,
                        }
                    )
                )
            else:
                call_id = None
                lines.append(
                    self._item(
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": "Done."}],
                        }
                    )
                )
            lowered = (
                lower_next
                and all(usage[k] <= totals[k] for k in USAGE_FIELDS)
                and usage["input_tokens"] < totals["input_tokens"]
            )
            if lowered:  # a newer build restarting its totals after a compaction
                totals = dict(usage)
            elif self.chance(o["coalesced"]):  # one event for two responses
                hidden = self._usage(max(1_000, context - rng.randint(100, 5_000)))
                totals = _usage_sum(_usage_sum(totals, hidden), usage)
            else:
                totals = _usage_sum(totals, usage)
            lower_next = False
            last = usage
            lines.append(self._token_count(dict(totals), dict(usage)))
            if call_id:
                lines.append(
                    self._item(
                        {"type": "function_call_output", "call_id": call_id, "output": "1 passed"}
                    )
                )
            while self.chance(o["re_emits"]):
                lines.append(self._token_count(dict(totals), dict(usage)))
            yield totals

    def session(self) -> None:
        rng, o = self.rng, self.o
        self.now += timedelta(minutes=rng.randint(10, 300))
        start = self.now
        session_id = self.ids.uuid7(start)
        model = rng.choice(("gpt-5.3-codex", "gpt-5.2-codex", "gpt-5-codex"))
        lines = [self._meta(session_id, start, rng.choice(("cli", "vscode", "exec")))]
        lines.append(
            self._item(
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "rules"}],
                }
            )
        )
        lines.extend(self._turn(model))
        lines.append(self._token_count(None, None))
        count = _draw(rng, o["calls_per_session"])
        fork_after = rng.randint(1, count) if self.chance(o["forks"]) else None
        fork = None
        calls = self._calls(lines, count, dict(ZERO_USAGE), compactions=True, model=model)
        for done, totals in enumerate(calls, start=1):
            if done == fork_after:
                fork = (self.now, dict(totals), len(lines))
        _dump(self._path(start, session_id), lines)
        if fork is not None:
            self._fork(session_id, lines, fork, model)

    def _fork(self, parent_id: str, parent_lines: list[dict], fork, model: str) -> None:
        """A spawned subagent's rollout: the parent's history replayed in one second, then
        its own calls, whose totals continue from the replayed ones."""
        rng = self.rng
        moment, totals, upto = fork
        second = (moment + timedelta(seconds=rng.uniform(0.5, 3))).replace(microsecond=0)
        child_id = self.ids.uuid7(second)
        replay = [
            line
            for line in parent_lines[:upto]
            if line["type"] == "response_item"
            or (
                line["type"] == "event_msg"
                and line["payload"].get("type") == "token_count"
                and line["payload"].get("info")
            )
        ]
        source = {
            "subagent": {
                "thread_spawn": {
                    "parent_thread_id": parent_id,
                    "depth": 1,
                    "agent_nickname": rng.choice(("Rowan", "Ash", "Juniper")),
                    "agent_role": "worker",
                }
            }
        }
        lines = [self._meta(child_id, second, source), self._token_count(None, None)]
        lines[-1]["timestamp"] = _stamp(second)
        for position, line in enumerate(replay):
            copied = copy.deepcopy(line)
            copied["timestamp"] = _stamp(
                second + timedelta(milliseconds=1 + position * 998 // len(replay))
            )
            lines.append(copied)
        self.now = second + timedelta(seconds=rng.uniform(2, 5))
        lines.extend(self._turn(model))
        count = _draw(rng, (1, max(1, self.o["calls_per_session"][1] // 4)))
        for _ in self._calls(lines, count, totals, compactions=False, model=model):
            pass
        _dump(self._path(second, child_id), lines)


def write_codex_corpus(
    root: Path,
    *,
    seed: int,
    sessions: int = 4,
    calls_per_session: tuple[int, int] = (1, 80),
    re_emits: float = 0.5,
    coalesced: float = 0.05,
    compactions: float = 0.02,
    lowered_totals: float = 0.5,
    forks: float = 0.0,
) -> None:
    """Write `sessions` Codex rollouts under `root`/sessions/YYYY/MM/DD/.

    * re_emits: probability, repeated, that a token_count event is emitted again unchanged
      (with a fresh timestamp).
    * coalesced: probability that one token_count covers two responses (the totals grow by
      both, `last_token_usage` shows only the second).
    * compactions: per-call probability of a compaction (non-billable marker, `compacted`,
      `context_compacted`); lowered_totals: probability that the totals then restart lower.
    * forks: probability that a session spawns a subagent rollout (`thread_spawn`) that
      replays the parent's history in one second before its own calls.
    """
    options = {
        "calls_per_session": calls_per_session,
        "re_emits": re_emits,
        "coalesced": coalesced,
        "compactions": compactions,
        "lowered_totals": lowered_totals,
        "forks": forks,
    }
    writer = _CodexWriter(Path(root), random.Random(seed), options)
    for _ in range(sessions):
        writer.session()
