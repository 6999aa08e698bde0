"""`context-governance statusline`: one line for Claude Code's status bar, comparing the
window with the qualified ECL and the approved limit for the session's model.

It never fails the harness: every problem becomes a short note on the line, and the exit
status is always 0. The limit is cached per server, token and model for `CACHE_SECONDS`;
after that it is fetched again, and when the server cannot be reached the cached limit is
shown marked "stale".
"""

from __future__ import annotations

import os
import time

import numfmt
from context_governance_cli import config, fastjson

CACHE_SECONDS = 300.0
REJECTED_SECONDS = 60.0  # a rejected token is asked about again after this long
TIMEOUT_SECONDS = 0.5  # the whole request; CONTEXT_GOVERNANCE_TIMEOUT overrides it
TAIL_BYTES = (64 * 1024, 1024 * 1024)
SEP = " · "


# --- the context size ----------------------------------------------------------------------


def _usage_total(usage: dict) -> int | None:
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    if not isinstance(usage, dict) or not any(isinstance(usage.get(k), int) for k in keys):
        return None
    return sum(usage.get(k) or 0 for k in keys if isinstance(usage.get(k), int))


def transcript_last_call(path: str) -> tuple[int | None, str]:
    """(window, model) of the main agent's last call, from the transcript's tail: its usage's
    input, cache-creation and cache-read tokens, and its model. The window is None when a
    compaction boundary comes after it (unknown until the next call) or nothing is found in
    the last megabyte; the model is "" when unknown."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below; sized reads from the end)
    except (OSError, TypeError, ValueError):
        return None, ""
    model = ""
    with handle:
        size = handle.seek(0, os.SEEK_END)
        for tail in TAIL_BYTES:
            handle.seek(max(0, size - tail))
            lines = handle.read().split(b"\n")
            if size > tail:
                lines = lines[1:]  # the first is probably cut
            for line in reversed(lines):
                if b'"usage"' not in line and b"compact_boundary" not in line:
                    continue
                try:
                    record = fastjson.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict) or record.get("isSidechain"):
                    continue
                message = record.get("message")
                if not model and record.get("type") == "assistant" and isinstance(message, dict):
                    model = message.get("model") if isinstance(message.get("model"), str) else ""
                if record.get("subtype") == "compact_boundary":
                    return None, model
                if record.get("type") == "assistant" and isinstance(message, dict):
                    total = _usage_total(message.get("usage"))
                    if total is not None:
                        return total, model
            if size <= tail:
                break
    return None, model


def transcript_context(path: str) -> int | None:
    """The window of the main agent's last call (see `transcript_last_call`)."""
    return transcript_last_call(path)[0]


def context_tokens(payload: dict) -> int | None:
    """The window now: `context_window.current_usage` (input + cache creation + cache read of
    the latest response), else the transcript's last usage, else `total_input_tokens`."""
    window = payload.get("context_window")
    window = window if isinstance(window, dict) else {}
    total = _usage_total(window.get("current_usage"))
    if total is not None:
        return total
    path = payload.get("transcript_path")
    if isinstance(path, str) and path:
        return transcript_context(path)
    value = window.get("total_input_tokens")
    return value if isinstance(value, int) else None


# --- where Claude Code will compact ----------------------------------------------------------


def _claude_settings(payload: dict, env) -> list[dict]:
    """User, project and local settings, in increasing precedence."""
    user_dir = env.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    workspace = payload.get("workspace") if isinstance(payload.get("workspace"), dict) else {}
    project = workspace.get("project_dir") or payload.get("cwd") or ""
    paths = [os.path.join(user_dir, "settings.json")]
    if isinstance(project, str) and project:
        paths += [os.path.join(project, ".claude", "settings.json")]
        paths += [os.path.join(project, ".claude", "settings.local.json")]
    return [config.read_json(path) for path in paths]


def _positive_int(value) -> int | None:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def compaction_threshold(payload: dict, env) -> int | str | None:
    """Where auto-compaction will happen, as far as the status input, the environment and the
    settings files tell: `CLAUDE_CODE_AUTO_COMPACT_WINDOW`, else `autoCompactWindow`, else the
    model's window; capped at the window and lowered by `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`.
    "off" when auto-compaction is disabled; None when unknown. A `--autocompact` launch flag
    is not visible to the status line."""
    if env.get("DISABLE_COMPACT") == "1" or env.get("DISABLE_AUTO_COMPACT") == "1":
        return "off"
    window_info = payload.get("context_window")
    window = (
        _positive_int((window_info or {}).get("context_window_size"))
        if isinstance(window_info, dict)
        else None
    )
    setting, enabled = None, True
    for settings in _claude_settings(payload, env):
        if "autoCompactWindow" in settings:
            setting = settings["autoCompactWindow"]
        if "autoCompactEnabled" in settings:
            enabled = settings["autoCompactEnabled"] is not False
    if not enabled:
        return "off"
    threshold = _positive_int(env.get("CLAUDE_CODE_AUTO_COMPACT_WINDOW")) or _positive_int(setting)
    threshold = threshold or window
    if threshold and window:
        threshold = min(threshold, window)
    percent = _positive_int(env.get("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"))
    if threshold and window and percent and percent <= 100:
        threshold = min(threshold, window * percent // 100)
    return threshold


# --- the limit, cached -----------------------------------------------------------------------


def _sha256_hex(data: bytes) -> str:
    """hashlib's sha256 without hashlib: its OpenSSL binding is the slowest import of the
    status line; the built-in module gives the same digest."""
    try:
        from _sha2 import sha256  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.11
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()


def _cache_key(settings: config.Settings, model_id: str, workload: str = "") -> str:
    token = _sha256_hex(settings.token.encode())[:16]
    return f"{settings.url}|{token}|{model_id}" + (f"|{workload}" if workload else "")


def status_timeout(env) -> float:
    try:
        return float(env.get("CONTEXT_GOVERNANCE_TIMEOUT") or TIMEOUT_SECONDS)
    except ValueError:
        return TIMEOUT_SECONDS


def cached_limit(
    settings, model_id: str, *, now: float, timeout: float = TIMEOUT_SECONDS, workload: str = ""
):
    """(answer, note): the server's answer for the model from the cache while fresh, else from
    the server; on failure the cached answer with note "stale", or None with a short note."""
    path = os.path.join(config.cache_dir_str(), "limits.json")
    cache = config.read_json(path)
    key = _cache_key(settings, model_id, workload)
    entry = cache.get(key) if isinstance(cache.get(key), dict) else None
    if entry and now - entry.get("fetched_at", 0) < CACHE_SECONDS:
        if entry.get("rejected"):
            if now - entry["fetched_at"] < REJECTED_SECONDS:
                return None, entry["rejected"]
        else:
            return entry.get("answer"), ""
    from urllib.parse import quote

    from context_governance_cli import client

    try:
        answer = client.request(
            "GET",
            settings.url,
            settings.token,
            f"/api/v1/operating-limits/active/?model={quote(model_id, safe='')}"
            + (f"&workload={quote(workload, safe='')}" if workload else ""),
            timeout=timeout,
        )
    except client.TokenRejected as exc:
        note = f"token rejected: {exc} Run `context-governance login`."
        cache[key] = {"fetched_at": now, "rejected": note}
        config.write_cache_json(path, cache)
        return None, note
    except (client.ServerUnreachable, client.ServerError) as exc:
        if entry and entry.get("answer") is not None:
            return entry["answer"], "stale"
        if isinstance(exc, client.ServerError):
            return None, f"server: {exc}"
        return None, f"server unreachable ({str(exc)[:60]})"
    cache[key] = {"fetched_at": now, "version": answer.get("version", ""), "answer": answer}
    config.write_cache_json(path, cache)
    return answer, ""


# --- the line --------------------------------------------------------------------------------


def _percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%"


def format_line(
    *,
    ctx: int | None,
    limit: dict | None,
    threshold: int | str | None,
    cost: float | None,
    note: str = "",
) -> str:
    parts = [f"ctx {numfmt.tokens(ctx) if ctx is not None else '?'}"]
    if limit:
        ecl = limit.get("ecl_tokens")
        if ecl:
            share = f" ({_percent(ctx, ecl)})" if ctx is not None else ""
            parts.append(f"qualified ECL {numfmt.tokens(ecl)}{share}")
        elif limit.get("ecl_text"):
            parts.append(f"qualified ECL {limit['ecl_text']}")
        maximum, reserve = limit["max_context_tokens"], limit.get("reserve_tokens") or 0
        state = ""
        if ctx is not None and ctx > maximum:
            state = " OVER"
        elif ctx is not None and ctx > maximum - reserve:
            state = " (in reserve)"
        stale = " (stale)" if note == "stale" else ""
        parts.append(f"limit {numfmt.tokens(maximum)}{state}{stale}")
    if threshold == "off":
        parts.append("auto-compact off")
    elif threshold:
        parts.append(f"compacts at {numfmt.tokens(threshold)}")
    if cost is not None:
        parts.append(numfmt.usd(cost))
    if note and note != "stale":
        parts.append(f"context-governance: {note}")
    return SEP.join(parts)


def render(raw: bytes, env, *, now: float | None = None) -> str:
    """The status line for one status-line input."""
    try:
        payload = fastjson.loads(raw)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        return "ctx ? · context-governance: the status input is not a JSON object"
    ctx = context_tokens(payload)
    cost_info = payload.get("cost") if isinstance(payload.get("cost"), dict) else {}
    cost = cost_info.get("total_cost_usd")
    cost = float(cost) if isinstance(cost, int | float) else None
    model = payload.get("model") if isinstance(payload.get("model"), dict) else {}
    model_id = str(model.get("id") or "")
    limit, note = None, ""
    settings = config.load_settings()
    if not settings.configured:
        note = "not logged in (run `context-governance login`)"
    elif not model_id:
        note = "no model id in the status input"
    else:
        answer, note = cached_limit(
            settings,
            model_id,
            now=now or time.time(),
            timeout=status_timeout(env),
            workload=env.get("CONTEXT_GOVERNANCE_WORKLOAD", "").strip(),
        )
        if answer is not None:
            limit = answer.get("limit")
            if limit is None and not note:
                note = f"no approved limit for {model_id}"
    return format_line(
        ctx=ctx, limit=limit, threshold=compaction_threshold(payload, env), cost=cost, note=note
    )


def main(stdin, stdout, env) -> int:
    try:
        line = render(stdin.read(), env)
    except Exception as exc:  # the status line must never fail the harness
        line = f"context-governance: {type(exc).__name__}: {exc}"[:200]
    stdout.write(line + "\n")
    stdout.flush()
    return 0
