"""Judge packets (seed 001 §6.1): what a judge sees of one sampled run. Pure.

A packet holds the operative directive, the inherited compaction summary (labelled as a
lossy digest), a numbered inventory of every conversation item the run had accumulated by its
last sampled step, each with its token count, and the sampled steps, each with what the agent
had before it (inventory items 1…k and its window) and what it did (its text, thinking and
tool calls). Judges answer with item numbers; the token fractions are computed from them.

Item sizes are estimated from their text at ≈4 characters a token (the harness reports tokens
per call, not per item); the window of each step is the measured prompt size of its call.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

CHARS_PER_TOKEN = 4
TOKEN_METHOD = "estimated from the item's text at ≈4 characters a token"
DIGEST_LABEL = (
    "Inherited compaction summary: a lossy digest written by the harness when the earlier "
    "conversation was compacted. It is not the original conversation."
)

# Item kinds, in the order they enter the window around one call.
SUMMARY = "summary"
OPERATOR = "operator_message"
THINKING = "thinking"
ASSISTANT = "assistant_text"
TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
KIND_LABELS = {
    SUMMARY: "compaction summary (lossy digest)",
    OPERATOR: "operator message",
    ASSISTANT: "assistant text",
    TOOL_CALL: "tool call",
    TOOL_RESULT: "tool result",
}


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN)) if text else 0


@dataclass(frozen=True)
class CallInput:
    """One call of the run: its session index, measured window and decompressed CallText."""

    call_index: int
    context_tokens: int
    text: dict | None


@dataclass(frozen=True)
class Item:
    id: int
    kind: str
    label: str
    tokens: int
    call_index: int
    text: str


@dataclass(frozen=True)
class Action:
    kind: str  # "text", "thinking" or "tool_call"
    text: str
    tool: str = ""
    is_error: bool = False


@dataclass(frozen=True)
class PacketStep:
    number: int  # 1-based within the packet
    call_index: int
    window_tokens: int
    had_through_item: int  # the step had inventory items 1…this (0: none)
    had_tokens: int
    directive_item: int | None  # the latest operator message it had
    did: list[Action] = field(default_factory=list)


@dataclass(frozen=True)
class Packet:
    run_id: int
    session_id: int
    agent_id: int
    task_type: str
    band: str
    directive: str
    directive_source: str
    summary: str | None
    summary_tokens: int | None
    summary_label: str
    items: list[Item]
    steps: list[PacketStep]
    token_method: str = TOKEN_METHOD

    @property
    def item_tokens(self) -> list[int]:
        return [item.tokens for item in self.items]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text_of_block(block: dict) -> str:
    kind = block.get("type")
    if kind in {"text", "thinking"}:
        return str(block.get("text") or "")
    if kind == "tool_use":
        value = block.get("input")
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return ""


def _tool_label(block: dict) -> str:
    value = block.get("input")
    name = str(block.get("name") or "tool")
    if isinstance(value, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "query", "description"):
            found = value.get(key)
            if isinstance(found, str) and found:
                return f"{name}: {found[:120]}"
    return name


def build_packet(
    *,
    run_id: int,
    session_id: int,
    agent_id: int,
    task_type: str,
    band: str,
    calls: Sequence[CallInput],
    step_call_indexes: Sequence[int],
    directive_before: str = "",
    summary_tokens: int | None = None,
) -> Packet:
    """The packet of one run from its calls (ascending, the run's first call through its last
    sampled step). `directive_before` is the latest operator message before the run (used
    when the run itself opens without one); `summary_tokens` is the summary's measured size
    when the compaction recorded it."""
    wanted = set(step_call_indexes)
    items: list[Item] = []
    steps: list[PacketStep] = []
    summary: str | None = None
    directive, directive_source = "", ""
    latest_operator: int | None = None
    pending_results: list[tuple[str, dict]] = []  # tool results waiting for the next call
    tool_names: dict[str, str] = {}

    def add(kind: str, label: str, text: str, call_index: int, tokens: int | None = None) -> int:
        item = Item(
            len(items) + 1,
            kind,
            label,
            estimate_tokens(text) if tokens is None else tokens,
            call_index,
            text,
        )
        items.append(item)
        return item.id

    last = max(wanted) if wanted else None
    for call in calls:
        if last is not None and call.call_index > last:
            break
        text = call.text or {}
        # Results of the previous call's tools reach the window before this call.
        for tool_id, result in pending_results:
            body = str(result.get("content") or "")
            name = tool_names.get(tool_id, "tool")
            error = " (error)" if result.get("is_error") else ""
            add(TOOL_RESULT, f"result of {name}{error}", body, call.call_index)
        pending_results = []
        raw_summary = text.get("summary")
        if isinstance(raw_summary, str) and raw_summary.strip() and summary is None and not items:
            summary = raw_summary
            add(SUMMARY, KIND_LABELS[SUMMARY], raw_summary, call.call_index, summary_tokens or None)
        prompt = text.get("prompt")
        if isinstance(prompt, str) and prompt.strip():
            latest_operator = add(OPERATOR, KIND_LABELS[OPERATOR], prompt, call.call_index)
            if not directive:
                directive, directive_source = prompt, f"operator message, call {call.call_index}"
        if not directive and directive_before.strip():
            directive, directive_source = directive_before, "latest operator message before the run"
        blocks = [b for b in text.get("blocks") or [] if isinstance(b, dict)]
        if call.call_index in wanted:
            did = []
            results = text.get("results") or {}
            for block in blocks:
                kind = block.get("type")
                if kind in {"text", "thinking"} and _text_of_block(block).strip():
                    did.append(Action(kind, _text_of_block(block)))
                elif kind == "tool_use":
                    result = results.get(str(block.get("id") or "")) or {}
                    did.append(
                        Action(
                            "tool_call",
                            _text_of_block(block),
                            tool=str(block.get("name") or ""),
                            is_error=bool(isinstance(result, dict) and result.get("is_error")),
                        )
                    )
            steps.append(
                PacketStep(
                    number=len(steps) + 1,
                    call_index=call.call_index,
                    window_tokens=call.context_tokens,
                    had_through_item=len(items),
                    had_tokens=sum(item.tokens for item in items),
                    directive_item=latest_operator,
                    did=did,
                )
            )
            if call.call_index == last:
                break
        # The call's own output joins the conversation for later calls. Thinking does not:
        # harnesses drop earlier thinking from the prompt, so it is shown only as what a step did.
        results = text.get("results") or {}
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and _text_of_block(block).strip():
                add(ASSISTANT, KIND_LABELS[ASSISTANT], _text_of_block(block), call.call_index)
            elif kind == "tool_use":
                tool_id = str(block.get("id") or "")
                tool_names[tool_id] = str(block.get("name") or "tool")
                add(TOOL_CALL, _tool_label(block), _text_of_block(block), call.call_index)
                if isinstance(results.get(tool_id), dict):
                    pending_results.append((tool_id, results[tool_id]))
    return Packet(
        run_id=run_id,
        session_id=session_id,
        agent_id=agent_id,
        task_type=task_type,
        band=band,
        directive=directive,
        directive_source=directive_source or "none found",
        summary=summary,
        summary_tokens=(summary_tokens or estimate_tokens(summary)) if summary else None,
        summary_label=DIGEST_LABEL,
        items=items,
        steps=steps,
    )


def invalid_item_ids(ids: Sequence[Any], had_through_item: int) -> list[Any]:
    """The ids that are not items the step had (whole numbers 1…had_through_item)."""
    bad = []
    for value in ids:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 1 <= value <= had_through_item
        ):
            bad.append(value)
    return bad
