"""`context-governance hook session-start|pre-compact|post-compact`: send Claude Code's hook
payload to the server (`POST /api/v1/hooks/`) within a short time budget, and print the
server's answer in Claude Code's hook-output format.

The server decides by the workspace's hook policy (the response's `answer`): at PreCompact a
suggestion (`systemMessage`) or a block (`{"decision": "block", "reason": …}`, the only way
a PreCompact hook can stop a compaction besides exit 2); at SessionStart
`hookSpecificOutput.additionalContext`. Nothing else is ever printed on stdout.

A hook never fails the harness: it always exits 0, spends at most `TIMEOUT_SECONDS` on the
request, and prints nothing when anything goes wrong. What cannot be sent in time is
appended to a spool file and sent with the next hook.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from context_governance_cli import config

EVENTS = {
    "session-start": "SessionStart",
    "pre-compact": "PreCompact",
    "post-compact": "PostCompact",
}
# The whole exchange (connect, send, answer); with Python's start this keeps a hook under
# 300 ms when the server is slow. Raise it with CONTEXT_GOVERNANCE_HOOK_TIMEOUT for a distant
# server: what times out is spooled and sent with a later hook.
TIMEOUT_SECONDS = 0.15
# The transcript lines appended since the last send get what is left of this after the event
# (CONTEXT_GOVERNANCE_LINES_TIMEOUT); what does not fit goes with a later hook.
LINES_TIMEOUT_SECONDS = 0.1
MAX_STDIN_BYTES = 8 * 1024 * 1024
MAX_BATCH = 200
MAX_BATCH_BYTES = 256 * 1024  # spooled events sent with one hook: what fits its time budget
MAX_SPOOL_BYTES = 20 * 1024 * 1024
MAX_OUTPUT_CHARS = 10_000  # Claude Code caps hook-output strings at 10,000 characters


def spool_path() -> Path:
    return config.cache_dir() / "hook-spool.jsonl"


def _claim_spool() -> tuple[list[dict], list[bytes]]:
    """Take the spool (atomically, so two hooks never send the same lines twice): the events to
    send now, and the raw lines beyond one batch, to put back."""
    path = spool_path()
    claimed = path.with_name(f"{path.name}.{os.getpid()}.sending")
    try:
        os.replace(path, claimed)
    except OSError:
        return [], []
    try:
        lines = [line for line in claimed.read_bytes().split(b"\n") if line.strip()]
    finally:
        claimed.unlink(missing_ok=True)
    events, size, taken = [], 0, 0
    for line in lines[: MAX_BATCH - 1]:
        if events and size + len(line) > MAX_BATCH_BYTES:
            break
        taken += 1
        size += len(line)
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events, lines[taken:]


def _spool(events: list[dict], extra_lines: list[bytes] = ()) -> bool:
    path = spool_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.exists() and path.stat().st_size > MAX_SPOOL_BYTES:
            return False
        data = b"".join(json.dumps(e).encode() + b"\n" for e in events)
        data += b"".join(line + b"\n" for line in extra_lines)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(descriptor, "ab") as handle:
            handle.write(data)
    except OSError:
        return False
    return True


def build_event(name: str, payload: dict, *, codex: bool = False) -> dict:
    event = {
        "event_id": uuid.uuid4().hex,
        "event": payload.get("hook_event_name") or EVENTS[name],
        "harness": "codex" if codex else "claude-code",
        "occurred_at": datetime.now(UTC).isoformat(),
        "payload": payload,
    }
    if codex:
        return _codex_event(name, payload, event)
    if name == "pre-compact" or (name == "session-start" and not payload.get("model")):
        # Claude Code's PreCompact input names no model, and SessionStart's `model` is optional:
        # the transcript's last main-agent call tells both (the window only for PreCompact).
        from context_governance_cli.statusline import transcript_last_call

        tokens, model = transcript_last_call(payload.get("transcript_path") or "")
        if name == "pre-compact":
            event["context_tokens"] = tokens
        if model:
            event["model"] = model
    return event


def _codex_event(name: str, payload: dict, event: dict) -> dict:
    """Codex's hook input names the model; PreCompact's context size is the rollout's last
    `token_count` (`transcript_path` is the rollout file)."""
    if isinstance(payload.get("model"), str) and payload["model"]:
        event["model"] = payload["model"][:200]
    if name == "pre-compact":
        from pathlib import Path

        from context_governance_cli.codex import rollout_last_call

        path = payload.get("transcript_path")
        tokens, model = rollout_last_call(Path(path) if isinstance(path, str) and path else None)
        event["context_tokens"] = tokens
        if model and "model" not in event:
            event["model"] = model
    return event


def _text(value) -> str:
    return value[:MAX_OUTPUT_CHARS] if isinstance(value, str) else ""


def claude_output(name: str, answer) -> dict | None:
    """The server's answer as Claude Code's hook output for this event; None: print nothing."""
    if not isinstance(answer, dict):
        return None
    action, message = answer.get("action"), _text(answer.get("message"))
    if name == "pre-compact":
        if action == "block" and message:
            return {"decision": "block", "reason": message}
        if action == "suggest" and message:
            # Claude Code discards a PreCompact's systemMessage (HARNESS_TELEMETRY.md §2); the
            # server repeats it at the SessionStart(compact) that follows the compaction.
            return {"systemMessage": message}
        return None
    if name == "session-start" and action == "context":
        output: dict = {}
        context = _text(answer.get("additional_context"))
        if context:
            output["hookSpecificOutput"] = {
                "hookEventName": "SessionStart",
                "additionalContext": context,
            }
        if message:
            output["systemMessage"] = message
        return output or None
    return None


def codex_output(name: str, answer) -> dict | None:
    """The server's answer in Codex's hook-output format (codex-rs/hooks schema): a block is
    `continue: false` with the reason (the compaction is not made); a suggestion is a
    `systemMessage` (Codex shows it as a warning); SessionStart's context is
    `hookSpecificOutput.additionalContext`. None: print nothing."""
    if not isinstance(answer, dict):
        return None
    action, message = answer.get("action"), _text(answer.get("message"))
    if name == "pre-compact":
        if action == "block" and message:
            return {"continue": False, "stopReason": message, "systemMessage": message}
        if action == "suggest" and message:
            return {"systemMessage": message}
        return None
    if name == "session-start" and action == "context":
        # The same keys as Claude Code's SessionStart output (hookSpecificOutput, systemMessage).
        return claude_output(name, answer)
    return None


def hook_timeout() -> float:
    try:
        return float(os.environ.get("CONTEXT_GOVERNANCE_HOOK_TIMEOUT") or TIMEOUT_SECONDS)
    except ValueError:
        return TIMEOUT_SECONDS


def lines_timeout() -> float:
    try:
        return float(os.environ.get("CONTEXT_GOVERNANCE_LINES_TIMEOUT") or LINES_TIMEOUT_SECONDS)
    except ValueError:
        return LINES_TIMEOUT_SECONDS


def send_lines(name: str, payload: dict, settings, *, err=sys.stderr, codex=False) -> dict:
    """Send the lines the hook's transcript gained, within `lines_timeout()`."""
    from context_governance_cli import transcript

    path = payload.get("transcript_path")
    deadline = time.monotonic() + lines_timeout()
    result = transcript.send_new_lines(
        settings, path if isinstance(path, str) else "", deadline,
        harness="codex" if codex else "claude-code",
    )  # fmt: skip
    if result["error"] and not result["unreachable"]:
        err.write(f"context-governance hook {name}: transcript lines refused: {result['error']}\n")
    if os.environ.get("CONTEXT_GOVERNANCE_DEBUG"):
        err.write(
            f"hook {name}: transcript lines: {result['sent']:,} bytes sent, "
            f"{result['left']:,} left {result['error']}\n"
        )
    return result


def send(settings, events: list[dict]) -> dict:
    from context_governance_cli import client

    return client.request(
        "POST", settings.url, settings.token, "/api/v1/hooks/", body={"events": events},
        timeout=hook_timeout(),
    )  # fmt: skip


def run(name: str, raw: bytes, *, err=sys.stderr, out=sys.stdout, codex: bool = False) -> int:
    """Send one hook event (and any spooled ones), print the answer for it; always 0."""
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        err.write(f"context-governance hook {name}: the hook input is not a JSON object\n")
        return 0
    settings = config.load_settings()
    if not settings.configured:
        err.write("context-governance: not logged in (run `context-governance login`)\n")
        return 0
    event = build_event(name, payload, codex=codex)
    # For PostCompact the lines go first: the compaction they hold is then there for the
    # summary. A server that did not answer them will not answer the event either: spool it.
    lines = None
    if name == "post-compact":
        lines = send_lines(name, payload, settings, err=err, codex=codex)
    if lines and lines["unreachable"]:
        kept = _spool([event])
        where = f"kept in {spool_path()}" if kept else "the spool is full; dropped"
        err.write(f"context-governance hook {name}: not sent ({lines['error']}); {where}\n")
        return 0
    response = deliver(f"hook {name}", event, settings, err=err)
    answer = response.get("answer") if isinstance(response, dict) else None
    if isinstance(answer, dict) and answer.get("event_id") == event["event_id"]:
        output = codex_output(name, answer) if codex else claude_output(name, answer)
        if output:
            out.write(json.dumps(output) + "\n")
            out.flush()
    if name != "post-compact" and response is not None:
        # After the answer, which must not wait for them; not when the event itself failed.
        send_lines(name, payload, settings, err=err, codex=codex)
    return 0


def deliver(label: str, event: dict, settings, *, err=sys.stderr) -> dict | None:
    """Send `event` after any spooled ones; the server's answer, or None when it was not
    delivered (spooled for the next hook, or refused and kept aside)."""
    from context_governance_cli import client

    spooled, rest = _claim_spool()
    batch = [*spooled, event]
    try:
        response = send(settings, batch)
    except client.ServerError as exc:
        # The server refused the batch (400): resending it cannot help; keep it for inspection.
        rejected = spool_path().with_name("hook-rejected.jsonl")
        try:
            with open(rejected, "a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(e) + "\n" for e in batch)
        except OSError:
            pass
        _spool([], rest)
        err.write(f"context-governance {label}: the server refused it: {exc}\n")
        return None
    except (client.ServerUnreachable, client.TokenRejected) as exc:
        kept = _spool(batch, rest)
        where = f"kept in {spool_path()}" if kept else "the spool is full; dropped"
        err.write(f"context-governance {label}: not sent ({exc}); {where}\n")
        return None
    if rest:
        _spool([], rest)
    return response


def main(name: str, stdin, *, codex: bool = False) -> int:
    started = time.monotonic()
    try:
        return run(name, stdin.read(MAX_STDIN_BYTES), codex=codex)
    except Exception as exc:  # a hook must never fail the harness
        sys.stderr.write(f"context-governance hook {name}: {type(exc).__name__}: {exc}\n")
        return 0
    finally:
        if os.environ.get("CONTEXT_GOVERNANCE_DEBUG"):
            sys.stderr.write(f"hook {name}: {1000 * (time.monotonic() - started):.1f} ms\n")
