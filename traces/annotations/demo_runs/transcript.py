"""Writing a demo run: a Claude Code transcript built line by line, with its token usage growing
with what the window holds. Pure: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import orjson

MODEL = "claude-sonnet-4-5"
VERSION = "2.1.80"
SYSTEM_TOKENS = 15_400  # system prompt, tool schemas and CLAUDE.md: cached before the first call


def tokens_of(text: str) -> int:
    """About four characters a token, as the ingestion estimates summaries."""
    return (len(text) + 3) // 4


@dataclass
class DemoRun:
    key: str  # the failure class the run was written to show
    title: str  # the task, as the session's title (it says nothing of what goes wrong)
    session_id: str
    project: str
    lines: list[bytes]
    calls: int  # API calls (one per message id, however many lines it was streamed as)
    compactions: int
    expected_call: int  # session index of the first consequential divergence
    evidence_calls: tuple[int, ...]  # earlier steps that show why


@dataclass
class _Transcript:
    """Writes a transcript as Claude Code does: one line per content block of a streamed
    message, each repeating the message's usage, then a user line per tool result."""

    session_id: str
    project: str
    clock: datetime
    lines: list[bytes] = field(default_factory=list)
    calls: int = 0
    compactions: int = 0
    window: int = SYSTEM_TOKENS  # tokens the next call will carry, before what is pending
    cached: int = SYSTEM_TOKENS  # prefix the cache already holds
    marked: int | None = None
    evidence: list[int] = field(default_factory=list)
    counter: int = 0

    def _base(self, kind: str, seconds: float) -> dict:
        self.counter += 1
        self.clock += timedelta(seconds=seconds)
        return {
            "type": kind,
            "parentUuid": f"{self.session_id[:8]}-{self.counter - 1:06d}"
            if self.counter > 1
            else None,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.project,
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": "main",
            "uuid": f"{self.session_id[:8]}-{self.counter:06d}",
            "timestamp": self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }

    def _write(self, line: dict) -> None:
        self.lines.append(orjson.dumps(line))

    def title(self, text: str) -> None:
        self._write({"type": "custom-title", "customTitle": text, "sessionId": self.session_id})

    def user(self, text: str, *, seconds: float = 30) -> None:
        self._write({**self._base("user", seconds), "message": {"role": "user", "content": text}})
        self.window += tokens_of(text) + 8

    def step(
        self,
        text: str = "",
        *,
        tool: str | None = None,
        args: dict | None = None,
        result: str = "",
        error: bool = False,
        thinking: str = "",
        diverges: bool = False,
        evidence: bool = False,
    ) -> int:
        """One API call (thinking, text, at most one tool call) and its tool result; returns
        its session index."""
        index = self.calls
        self.calls += 1
        if diverges:
            self.marked = index
        if evidence:
            self.evidence.append(index)
        message_id = f"msg_01{self.session_id[:6]}{index:04d}"
        request_id = f"req_01{self.session_id[-6:]}{index:04d}"
        tool_id = f"toolu_01{self.session_id[:6]}{index:04d}"
        blocks = _content_blocks(text, thinking=thinking, tool=tool, tool_id=tool_id, args=args)
        output = sum(tokens_of(orjson.dumps(b).decode()) for b in blocks) + 12
        context = self.window
        usage = {
            "input_tokens": 3,
            "cache_creation_input_tokens": context - 3 - min(self.cached, context - 3),
            "cache_read_input_tokens": min(self.cached, context - 3),
        }
        for number, block in enumerate(blocks):
            last = number == len(blocks) - 1
            self._write(
                {
                    **self._base("assistant", 2 if number else 6),
                    "requestId": request_id,
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": MODEL,
                        "content": [block],
                        "stop_reason": ("tool_use" if tool else "end_turn") if last else None,
                        "stop_sequence": None,
                        # Streamed lines before the last hold a partial output count.
                        "usage": {
                            **usage,
                            "output_tokens": output if last else 1 + number,
                            "service_tier": "standard",
                        },
                    },
                }
            )
        self.cached = context
        self.window = context + output
        if tool:
            self._tool_result(tool=tool, tool_id=tool_id, result=result, error=error)
        return index

    def _tool_result(self, *, tool: str, tool_id: str, result: str, error: bool) -> None:
        """The user line carrying a tool call's result; the window grows by it."""
        content = {"type": "tool_result", "tool_use_id": tool_id, "content": result}
        if error:
            content["is_error"] = True
        self._write(
            {
                **self._base("user", 3),
                "message": {"role": "user", "content": [content]},
                "toolUseResult": {"stdout": result} if tool == "Bash" else {},
            }
        )
        self.window += tokens_of(result) + 10

    def compact(self, summary: str, *, trigger: str = "manual", focus: str = "") -> None:
        """`/compact [focus]`: the boundary record, then the summary the model continues from."""
        if trigger == "manual":
            self.user(
                "<command-name>/compact</command-name>\n<command-message>compact</command-message>"
                f"\n<command-args>{focus}</command-args>"
            )
        pre = self.window
        self.compactions += 1
        self.window = SYSTEM_TOKENS + tokens_of(summary) + 8
        self._write(
            {
                **self._base("system", 40),
                "parentUuid": None,
                "logicalParentUuid": f"{self.session_id[:8]}-{self.counter - 1:06d}",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "level": "info",
                "compactMetadata": {
                    "trigger": trigger,
                    "preTokens": pre,
                    "postTokens": self.window,
                    "durationMs": 38_412,
                },
            }
        )
        self._write(
            {
                **self._base("user", 1),
                "isCompactSummary": True,
                "isVisibleInTranscriptOnly": True,
                "message": {"role": "user", "content": summary},
            }
        )
        self.cached = SYSTEM_TOKENS

    def done(self, key: str, title: str) -> DemoRun:
        assert self.marked is not None, "a demo run marks where it goes wrong"
        return DemoRun(
            key, title, self.session_id, self.project, self.lines, self.calls, self.compactions,
            self.marked, tuple(self.evidence),
        )  # fmt: skip


def _content_blocks(
    text: str, *, thinking: str, tool: str | None, tool_id: str, args: dict | None
) -> list[dict]:
    """The content blocks of one API call, in the order they stream: thinking, text, tool call."""
    blocks = []
    if thinking:
        blocks.append({"type": "thinking", "thinking": thinking, "signature": "EqoBCkgIBx"})
    if text:
        blocks.append({"type": "text", "text": text})
    if tool:
        blocks.append({"type": "tool_use", "id": tool_id, "name": tool, "input": args or {}})
    return blocks


def _start(session_id: str, project: str, when: str, title: str) -> _Transcript:
    writer = _Transcript(session_id, project, datetime.fromisoformat(when).replace(tzinfo=UTC))
    writer.title(title)
    return writer


def _numbered(text: str) -> str:
    """A file as Claude Code's Read tool returns it: right-aligned line numbers and a tab."""
    return "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(text.split("\n"), 1))
