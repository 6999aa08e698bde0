"""Steps of the trace viewer, built from call rows and their stored text (CallText). Pure.

A step is one deduplicated call: its numbers (context, tokens added, output), the compaction
summary and the prompt that preceded it, its assistant text, thinking and tool calls with arguments, and each tool's
result. Long parts are cut to a preview; the viewer fetches the whole part on request. Text
stays text: the templates escape it, and Markdown code fences become code segments shown
monospaced (nothing is ever rendered as HTML).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PREVIEW_CHARS = 1200
PREVIEW_LINES = 16
RESULT_PREVIEW_CHARS = 700
RESULT_PREVIEW_LINES = 10
SUMMARY_PREVIEW_CHARS = 3000  # a compaction summary is read whole more often than not
SUMMARY_PREVIEW_LINES = 40
SPAWN_TOOLS = {"Task", "Agent"}

_FENCE = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)[^\n]*$")


@dataclass(frozen=True)
class Segment:
    kind: str  # "text" or "code"
    text: str
    lang: str = ""


def segments(text: str) -> list[Segment]:
    """Split Markdown-ish text into prose and fenced code blocks (an unclosed fence runs to
    the end, as in CommonMark)."""
    out: list[Segment] = []
    prose: list[str] = []
    code: list[str] | None = None
    fence = ""
    lang = ""
    for line in text.split("\n"):
        if code is None:
            match = _FENCE.match(line)
            if match:
                if prose:
                    out.append(Segment("text", "\n".join(prose)))
                    prose = []
                code, fence, lang = [], match["fence"], match["lang"]
            else:
                prose.append(line)
        else:
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) <= {fence[0]}:
                out.append(Segment("code", "\n".join(code), lang))
                code = None
            else:
                code.append(line)
    if code is not None:
        out.append(Segment("code", "\n".join(code), lang))
    if prose and any(p.strip() for p in prose):
        out.append(Segment("text", "\n".join(prose)))
    return [s for s in out if s.kind == "code" or s.text.strip()]


@dataclass(frozen=True)
class Preview:
    """A part of a step, cut for the list. `key` names it for the full-text fetch."""

    key: str
    text: str
    total_chars: int
    truncated: bool
    hidden_lines: int
    upstream_truncated_chars: int = 0  # cut by ingestion (results over 100,000 characters)

    @property
    def segments(self) -> list[Segment]:
        return segments(self.text)


def preview(key: str, text: str, *, chars: int = PREVIEW_CHARS, lines: int = PREVIEW_LINES, upstream: int = 0) -> Preview:  # fmt: skip
    text = text or ""
    cut = text
    if len(cut) > chars:
        cut = cut[:chars]
    split = cut.split("\n")
    if len(split) > lines:
        cut = "\n".join(split[:lines])
    truncated = len(cut) < len(text)
    hidden = text.count("\n") - cut.count("\n") if truncated else 0
    return Preview(key, cut, len(text), truncated, hidden, upstream)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    summary: str  # the argument that says most (command, path, pattern, description)
    arguments: Preview  # pretty JSON of the input
    result: Preview | None
    is_error: bool
    spawned_agent: int | None  # the subagent this call started


@dataclass(frozen=True)
class Block:
    kind: str  # "text", "thinking" or "tool_use"
    content: Preview | None = None
    tool: ToolCall | None = None


@dataclass(frozen=True)
class StepRow:
    """The columns of one call the viewer needs (selectors load these, not model instances)."""

    call_index: int
    agent_index: int
    timestamp: datetime | None
    model: str
    context: int
    output: int
    input: int
    cache_creation: int
    cache_read: int
    previous_context: int | None  # the agent's previous call, if any


@dataclass(frozen=True)
class Step:
    call_index: int
    agent_index: int
    position: int  # 1-based step number within the run or agent shown
    timestamp: datetime | None
    model: str
    context: int
    added: int | None
    output: int
    input: int
    cache_creation: int
    cache_read: int
    prompt: Preview | None
    blocks: list[Block]
    has_text: bool
    tool_names: list[str] = field(default_factory=list)
    summary: Preview | None = None  # the compaction summary the call continued from


_SUMMARY_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description")


def _summary(name: str, tool_input: Any) -> str:
    if not isinstance(tool_input, dict):
        return ""
    for key in _SUMMARY_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value if len(value) <= 200 else value[:199] + "…"
    return ""


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def format_arguments(value: Any) -> str:
    """A tool's input as `key: value` lines, strings verbatim (a multi-line string as an
    indented block), so prompts, commands and file contents read as they were sent rather
    than as escaped JSON. Other values stay JSON."""
    if not isinstance(value, dict):
        return pretty_json(value)
    lines = []
    for key, item in value.items():
        if isinstance(item, str) and "\n" in item:
            lines.append(f"{key}: |")
            lines.extend(f"  {line}" for line in item.split("\n"))
        elif isinstance(item, str):
            lines.append(f"{key}: {item}")
        else:
            lines.append(f"{key}: {json.dumps(item, ensure_ascii=False, default=str)}")
    return "\n".join(lines)


def full_part(text: dict | None, key: str) -> str | None:
    """The whole text of one part named by its preview key, or None when there is no such part."""
    if not text:
        return None
    if key in {"prompt", "summary"}:
        value = text.get(key)
        return value if isinstance(value, str) else None
    kind, _, rest = key.partition(":")
    blocks = text.get("blocks") or []
    if kind in {"text", "thinking"} and rest.isdigit():
        number = int(rest)
        if number < len(blocks) and blocks[number].get("type") == kind:
            return str(blocks[number].get("text") or "")
        return None
    if kind == "input":
        for block in blocks:
            if block.get("type") == "tool_use" and block.get("id") == rest:
                return format_arguments(block.get("input"))
        return None
    if kind == "result":
        result = (text.get("results") or {}).get(rest)
        return str(result.get("content") or "") if isinstance(result, dict) else None
    return None


def build_step(
    row: StepRow, text: dict | None, *, position: int, spawns: dict[str, int] | None = None
) -> Step:
    """One step from a call's row and its decompressed CallText (None when none was stored)."""
    spawns = spawns or {}
    blocks: list[Block] = []
    results = (text or {}).get("results") or {}
    tool_names: list[str] = []
    for number, block in enumerate((text or {}).get("blocks") or []):
        kind = block.get("type")
        if kind in {"text", "thinking"}:
            body = str(block.get("text") or "")
            if body.strip():
                blocks.append(Block(kind, content=preview(f"{kind}:{number}", body)))
        elif kind == "tool_use":
            tool_id = str(block.get("id") or "")
            name = str(block.get("name") or "")
            tool_names.append(name)
            result = results.get(tool_id) if tool_id else None
            result_preview = None
            if isinstance(result, dict):
                result_preview = preview(
                    f"result:{tool_id}",
                    str(result.get("content") or ""),
                    chars=RESULT_PREVIEW_CHARS,
                    lines=RESULT_PREVIEW_LINES,
                    upstream=int(result.get("truncated_chars") or 0),
                )
            blocks.append(
                Block(
                    "tool_use",
                    tool=ToolCall(
                        id=tool_id,
                        name=name,
                        summary=_summary(name, block.get("input")),
                        arguments=preview(
                            f"input:{tool_id}",
                            format_arguments(block.get("input")),
                            chars=900,
                            lines=14,
                        ),
                        result=result_preview,
                        is_error=bool(isinstance(result, dict) and result.get("is_error")),
                        spawned_agent=spawns.get(tool_id)
                        if name in SPAWN_TOOLS or tool_id in spawns
                        else None,
                    ),
                )
            )
    prompt = (text or {}).get("prompt")
    summary = (text or {}).get("summary")
    added = None if row.previous_context is None else row.context - row.previous_context
    return Step(
        call_index=row.call_index,
        agent_index=row.agent_index,
        position=position,
        timestamp=row.timestamp,
        model=row.model,
        context=row.context,
        added=added,
        output=row.output,
        input=row.input,
        cache_creation=row.cache_creation,
        cache_read=row.cache_read,
        prompt=preview("prompt", prompt) if isinstance(prompt, str) and prompt.strip() else None,
        blocks=blocks,
        has_text=text is not None,
        tool_names=tool_names,
        summary=preview(
            "summary", summary, chars=SUMMARY_PREVIEW_CHARS, lines=SUMMARY_PREVIEW_LINES
        )
        if isinstance(summary, str) and summary.strip()
        else None,
    )
