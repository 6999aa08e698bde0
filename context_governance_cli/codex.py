"""Codex CLI: `context-governance codex-notify '<json>'` records each finished turn, and
`install-hooks --codex` puts it in `~/.codex/config.toml` as Codex's `notify` program.

Codex runs the `notify` program after each agent turn with one JSON argument appended
(`{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd", "client"?,
"input-messages", "last-assistant-message"}`, codex-rs/hooks/src/legacy_notify.rs), stdin,
stdout and stderr closed, without waiting for it. Nothing the program prints reaches Codex or
the user, so the turn is only recorded: the thread, the turn, and the context of its last
call read from the thread's rollout file. The prompt and the reply are not sent, only their
lengths.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from context_governance_cli import config, hooks

NOTIFY_TYPE = "agent-turn-complete"
TAIL_BYTES = 1024 * 1024


def codex_home(env=os.environ) -> Path:
    return Path(env.get("CODEX_HOME") or Path.home() / ".codex")


def rollout_path(thread_id: str, *, env=os.environ, now: datetime | None = None) -> Path | None:
    """The thread's rollout file (`sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`),
    looked for under today's and yesterday's directories (local and UTC dates)."""
    if not thread_id or "/" in thread_id or "*" in thread_id or "?" in thread_id:
        return None
    now = now or datetime.now(UTC)
    days = []
    for moment in (now, now.astimezone(), now - timedelta(days=1), now.astimezone() - timedelta(1)):
        if moment.date() not in days:
            days.append(moment.date())
    sessions = codex_home(env) / "sessions"
    for day in days:
        folder = sessions / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}"
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found = sorted(
            n for n in names if n.startswith("rollout-") and n.endswith(f"-{thread_id}.jsonl")
        )
        if found:
            return folder / found[-1]
    return None


def rollout_last_call(path: Path | None) -> tuple[int | None, str]:
    """(context, model) from the rollout's tail: the last `token_count`'s
    `last_token_usage.input_tokens` (cached input included) and the last `turn_context`'s
    model. The context is None after a compaction with no call since, or when not found."""
    if path is None:
        return None, ""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            lines = handle.read().split(b"\n")
    except OSError:
        return None, ""
    if size > TAIL_BYTES:
        lines = lines[1:]
    context, model, done = None, "", False
    for line in reversed(lines):
        if not (b"token_count" in line or b"turn_context" in line or b"compacted" in line):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if not isinstance(payload, dict):
            continue
        if not model and record.get("type") == "turn_context":
            model = payload.get("model") if isinstance(payload.get("model"), str) else ""
        if done:
            if model:
                break
            continue
        if record.get("type") == "compacted" or payload.get("type") == "context_compacted":
            done = True
        elif payload.get("type") == "token_count" and isinstance(payload.get("info"), dict):
            last = payload["info"].get("last_token_usage")
            tokens = last.get("input_tokens") if isinstance(last, dict) else None
            if isinstance(tokens, int) and tokens > 0:  # a compaction marker has 0
                context, done = tokens, True
    return context, model


def build_event(notification: dict, *, env=os.environ) -> dict:
    thread_id = str(notification.get("thread-id") or "")
    payload = {
        k: v
        for k, v in notification.items()
        if k not in ("input-messages", "last-assistant-message")
    }
    messages = notification.get("input-messages")
    payload["input-messages-chars"] = (
        sum(len(m) for m in messages if isinstance(m, str)) if isinstance(messages, list) else 0
    )
    reply = notification.get("last-assistant-message")
    payload["last-assistant-message-chars"] = len(reply) if isinstance(reply, str) else 0
    payload["session_id"] = thread_id  # the server's session key, as in Claude Code's hooks
    context, model = rollout_last_call(rollout_path(thread_id, env=env))
    event = {
        "event_id": uuid.uuid4().hex,
        "event": NOTIFY_TYPE,
        "harness": "codex",
        "occurred_at": datetime.now(UTC).isoformat(),
        "context_tokens": context,
        "payload": payload,
    }
    if model:
        event["model"] = model
    return event


def notify(argv: list[str], *, err=sys.stderr) -> int:
    """`codex-notify '<json>'`: record one Codex turn; always 0, prints nothing on stdout."""
    try:
        notification = json.loads(argv[-1]) if argv else None
    except ValueError:
        notification = None
    if not isinstance(notification, dict):
        err.write("context-governance codex-notify: the last argument is not a JSON object\n")
        return 0
    if notification.get("type") != NOTIFY_TYPE:
        return 0  # other notification types: nothing to record
    settings = config.load_settings()
    if not settings.configured:
        err.write("context-governance: not logged in (run `context-governance login`)\n")
        return 0
    hooks.deliver("codex-notify", build_event(notification), settings, err=err)
    return 0


def main(argv: list[str]) -> int:
    try:
        return notify(argv)
    except Exception as exc:  # never fail the harness
        sys.stderr.write(f"context-governance codex-notify: {type(exc).__name__}: {exc}\n")
        return 0
