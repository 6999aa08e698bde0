"""Builders for crafted Claude Code and Codex transcript lines (this project's own fixtures)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

BASE = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def ts(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def claude_assistant(
    msg: str,
    req: str | None,
    *,
    t: float = 0,
    inp: int = 5,
    cc: int = 100,
    cr: int = 1000,
    out: int = 10,
    content=None,
    session: str = "sess-1",
    sidechain: bool = False,
    uuid: str | None = None,
    parent: str | None = None,
    model: str = "claude-sonnet-4-5",
    **extra,
) -> str:
    line = {
        "type": "assistant",
        "sessionId": session,
        "isSidechain": sidechain,
        "uuid": uuid or f"u-{msg}-{out}-{t}",
        "parentUuid": parent,
        "timestamp": ts(t),
        "version": "2.1.50",
        "cwd": "/work/project",
        "gitBranch": "main",
        "message": {
            "id": msg,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content
            if content is not None
            else [{"type": "text", "text": f"text of {msg}"}],
            "usage": {
                "input_tokens": inp,
                "cache_creation_input_tokens": cc,
                "cache_read_input_tokens": cr,
                "output_tokens": out,
            },
        },
        **extra,
    }
    if req is not None:
        line["requestId"] = req
    return json.dumps(line)


def claude_user(
    text_or_blocks,
    *,
    t: float = 0,
    session: str = "sess-1",
    sidechain: bool = False,
    uuid=None,
    parent=None,
    **extra,
) -> str:
    return json.dumps(
        {
            "type": "user",
            "sessionId": session,
            "isSidechain": sidechain,
            "uuid": uuid or f"user-{t}",
            "parentUuid": parent,
            "timestamp": ts(t),
            "message": {"role": "user", "content": text_or_blocks},
            **extra,
        }
    )


def claude_boundary(
    *,
    t: float,
    pre: int,
    trigger: str = "auto",
    session: str = "sess-1",
    uuid: str = "cb-1",
    **meta,
) -> str:
    return json.dumps(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "sessionId": session,
            "isSidechain": False,
            "uuid": uuid,
            "parentUuid": None,
            "timestamp": ts(t),
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": trigger, "preTokens": pre, **meta},
        }
    )


def claude_session(
    n_calls: int,
    *,
    session: str = "sess-1",
    start_context: int = 20_000,
    growth: int = 1500,
    dup_lines: int = 2,
    tool: str = "Read",
) -> list[str]:
    """A plausible main-thread transcript: each call streams `dup_lines` lines, then a tool result."""
    lines = [claude_user("Please fix the failing test", t=0, session=session)]
    for i in range(n_calls):
        context = start_context + i * growth
        tool_id = f"toolu_{session}_{i}"
        for part in range(dup_lines):
            content = (
                [{"type": "text", "text": f"step {i}"}]
                if part < dup_lines - 1
                else [
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": tool,
                        "input": {"file_path": f"/src/mod_{i % 7}.py"},
                    }
                ]
            )
            lines.append(
                claude_assistant(
                    f"msg_{session}_{i}",
                    f"req_{session}_{i}",
                    t=10 * i + part * 0.1 + 1,
                    inp=3,
                    cc=200,
                    cr=context - 203,
                    out=1 if part < dup_lines - 1 else 50 + i,
                    content=content,
                    session=session,
                )
            )
        lines.append(
            claude_user(
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": f"contents of mod_{i % 7}.py",
                    }
                ],
                t=10 * i + 5,
                session=session,
            )
        )
    return lines


def codex_token_count(*, t: float, total: dict | None, last: dict | None) -> str:
    info = (
        None
        if total is None and last is None
        else {"total_token_usage": total, "last_token_usage": last, "model_context_window": 258400}
    )
    return json.dumps(
        {"timestamp": ts(t), "type": "event_msg", "payload": {"type": "token_count", "info": info}}
    )


def usage(inp: int, cached: int = 0, out: int = 0, reasoning: int = 0) -> dict:
    return {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
        "total_tokens": inp + out,
    }


def codex_meta(session_id: str = "019c0000-0000-7000-8000-000000000001", t: float = 0) -> str:
    return json.dumps(
        {
            "timestamp": ts(t),
            "type": "session_meta",
            "payload": {
                "id": session_id,
                "cwd": "/work/repo",
                "cli_version": "0.104.0",
                "git": {"branch": "main"},
            },
        }
    )


def codex_turn(model: str = "gpt-5.3-codex", t: float = 0) -> str:
    return json.dumps(
        {
            "timestamp": ts(t),
            "type": "turn_context",
            "payload": {"model": model, "cwd": "/work/repo"},
        }
    )


def write_lines(path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")
