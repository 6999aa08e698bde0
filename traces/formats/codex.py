"""Streaming parser for OpenAI Codex CLI rollout files (JSONL). No Django.

Usage comes from `token_count` events: a call is the delta of `total_token_usage` from
the previous event, and events whose totals did not grow (re-emits, non-billable
markers) are dropped as duplicates. When totals are missing or go down, the event's
`last_token_usage` is used. Newer rollouts carry `token_usage_record` lines, unique per
(thread_id, response_id); once one appears, `token_count` events are no longer counted.
Codex's `input_tokens` includes cached input, so the context of a call is its
`last_token_usage.input_tokens`, and uncached input is input − cached − cache writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import orjson

from traces.formats.claude_code import MAX_RESULT_CHARS, parse_timestamp
from traces.formats.records import (
    CallRecord,
    CompactionRecord,
    ParseError,
    ParseStats,
    SessionInfo,
    estimate_tokens,
)
from traces.formats.tools import signature_and_touches

HARNESS = "codex"
KNOWN_TYPES = {
    "session_meta", "response_item", "compacted", "turn_context", "event_msg",
    "token_usage_record", "inter_agent_communication", "world_state", "retained_context",
    "realtime_item", "security_risk_score",
}  # fmt: skip
USAGE_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "cache_write_input_tokens",
)
TOOL_ITEMS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
RESULT_ITEMS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
HOLD_CALLS = 8  # calls kept back so that their tool outputs can still be attached
_UUID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", re.I)


def session_id_from_path(path: str) -> str | None:
    match = _UUID.search(path)
    return match.group(1) if match else None


class CodexParser:
    def __init__(self, path: str = "", fallback_session_id: str = "", state: dict | None = None):
        self.path = path
        self.stats = ParseStats()
        self.session_id = session_id_from_path(path) or fallback_session_id
        self._announced = False
        self._model = ""
        self._cwd = ""
        self._previous_totals: dict | None = None
        self._records_mode = False
        self._seen_records: set[tuple[str, str]] = set()
        self._buffer: list[dict] = []  # model output items since the last counted event
        self._signature: list[str] = []
        self._touches: list[tuple[str, str]] = []
        self._prompt = ""
        self._held: list[CallRecord] = []
        self._tool_owner: dict[str, CallRecord] = {}
        self._last_context: int | None = None
        self._replay: dict | None = None  # a spawned rollout's replayed parent history
        self.first_line = 1
        if state:
            self._restore(state)

    def state(self, *, lines: int) -> dict:
        """What a parser needs to go on reading this rollout after its first `lines` lines,
        when it grows (call after `parse` is exhausted). Every call was released by then;
        the output items since the last counted event belong to the next call."""
        return {
            "lines": lines,
            "session_id": self.session_id,
            "announced": self._announced,
            "model": self._model,
            "cwd": self._cwd,
            "previous_totals": self._previous_totals,
            "records_mode": self._records_mode,
            "buffer": self._buffer,
            "signature": self._signature,
            "touches": self._touches,
            "prompt": self._prompt,
            "last_context": self._last_context,
            "replay": self._replay,
        }

    def _restore(self, state: dict) -> None:
        self.first_line = int(state.get("lines") or 0) + 1
        self.session_id = str(state.get("session_id") or self.session_id)
        self._announced = bool(state.get("announced"))
        self._model = str(state.get("model") or "")
        self._cwd = str(state.get("cwd") or "")
        self._previous_totals = state.get("previous_totals")
        self._records_mode = bool(state.get("records_mode"))
        self._buffer = list(state.get("buffer") or ())
        self._signature = list(state.get("signature") or ())
        self._touches = [tuple(pair) for pair in state.get("touches") or ()]
        self._prompt = str(state.get("prompt") or "")
        self._last_context = state.get("last_context")
        replay = state.get("replay")
        if isinstance(replay, dict) and isinstance(replay.get("held"), list):
            replay["held"] = tuple(replay["held"])
        self._replay = replay

    def parse(self, lines: Iterable[bytes]) -> Iterator:
        for number, raw in enumerate(lines, start=self.first_line):
            self.stats.lines += 1
            stripped = raw.strip()
            if not stripped:
                self.stats.ignored_lines += 1
                continue
            try:
                entry = orjson.loads(stripped)
            except orjson.JSONDecodeError as exc:
                self.stats.malformed_lines += 1
                yield ParseError(number, f"malformed JSON: {exc}")
                continue
            if not isinstance(entry, dict):
                self.stats.malformed_lines += 1
                yield ParseError(number, f"expected a JSON object, got {type(entry).__name__}")
                continue
            kind = entry.get("type")
            if not isinstance(kind, str):
                self.stats.malformed_lines += 1
                yield ParseError(number, "field 'type' must be a string")
                continue
            if kind not in KNOWN_TYPES:
                self.stats.ignored_lines += 1
                yield ParseError(number, f"unknown record type {kind!r} (skipped)")
                continue
            payload = entry.get("payload")
            if not isinstance(payload, dict):
                self.stats.malformed_lines += 1
                yield ParseError(number, f"{kind} record without a 'payload' object")
                continue
            yield from self._entry(kind, payload, entry, number)
        if self._replay is not None and self._replay.get("held"):
            held, self._replay = self._replay["held"], None  # one event alone is no replay
            yield from self._token_count(*held)
        yield from self._release(0)
        if not self._announced and self.session_id:
            yield from self._announce({})

    # --- dispatch -------------------------------------------------------------

    def _entry(self, kind: str, payload: dict, entry: dict, line: int) -> Iterator:
        if kind == "session_meta":
            if isinstance(payload.get("id"), str) and payload["id"] and not self._announced:
                self.session_id = payload["id"]
            self._cwd = str(payload.get("cwd") or self._cwd)
            source = payload.get("source")
            spawned = isinstance(source, dict) and isinstance(source.get("subagent"), dict)
            if spawned and "thread_spawn" in source["subagent"] and self.stats.usage_lines == 0:
                self._replay = {"second": None}
            yield from self._announce(payload)
            self.stats.ignored_lines += 1
            return
        if not self.session_id:
            self.stats.malformed_lines += 1
            yield ParseError(
                line, "no session id yet (no session_meta line and none in the file name)"
            )
            return
        if not self._announced:
            yield from self._announce({})
        if kind == "turn_context":
            self._model = str(payload.get("model") or self._model)
            self.stats.ignored_lines += 1
        elif kind == "response_item":
            self._response_item(payload)
            self.stats.ignored_lines += 1
        elif kind == "event_msg":
            yield from self._event(payload, entry, line)
        elif kind == "token_usage_record":
            yield from self._usage_record(payload, entry, line)
        elif kind == "compacted":
            yield from self._compacted(payload, entry, line)
        else:
            self.stats.ignored_lines += 1

    def _announce(self, payload: dict) -> Iterator[SessionInfo]:
        self._announced = True
        git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
        yield SessionInfo(
            harness=HARNESS,
            external_id=self.session_id,
            project=self._cwd,
            git_branch=str(git.get("branch") or ""),
            harness_version=str(payload.get("cli_version") or ""),
        )

    def _response_item(self, payload: dict) -> None:
        item_type = payload.get("type")
        if item_type == "message" and payload.get("role") == "assistant":
            text = _content_text(payload.get("content"))
            if text:
                self._buffer.append({"type": "text", "text": text})
        elif item_type == "reasoning":
            summary = payload.get("summary")
            text = _content_text(summary) if isinstance(summary, list) else ""
            if text:
                self._buffer.append({"type": "thinking", "text": text})
        elif item_type in TOOL_ITEMS:
            name = str(payload.get("name") or item_type)
            tool_input = payload.get("arguments", payload.get("input", payload.get("action")))
            if isinstance(tool_input, str):
                try:
                    tool_input = orjson.loads(tool_input)
                except orjson.JSONDecodeError:
                    pass
            call_id = str(payload.get("call_id") or payload.get("id") or "")
            self._buffer.append(
                {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}
            )
            token, touches = signature_and_touches(
                "WebSearch" if item_type == "web_search_call" else name, tool_input
            )
            self._signature.append(token)
            self._touches.extend(touches)
        elif item_type in RESULT_ITEMS:
            call_id = payload.get("call_id")
            owner = self._tool_owner.pop(call_id, None) if isinstance(call_id, str) else None
            if owner is not None:
                output = payload.get("output")
                if isinstance(output, dict):
                    output = output.get("content") or orjson.dumps(output).decode()
                text = output if isinstance(output, str) else _content_text(output)
                owner.text.setdefault("results", {})[call_id] = {
                    "content": text[:MAX_RESULT_CHARS],
                    "is_error": False,
                    "truncated_chars": max(0, len(text) - MAX_RESULT_CHARS),
                }

    def _event(self, payload: dict, entry: dict, line: int) -> Iterator:
        event_type = payload.get("type")
        if event_type == "user_message":
            self._prompt = str(payload.get("message") or "")[:MAX_RESULT_CHARS]
            self.stats.ignored_lines += 1
            return
        if event_type != "token_count":
            self.stats.ignored_lines += 1
            return
        info = payload.get("info")
        if info is None or self._records_mode:
            self.stats.ignored_lines += 1
            return
        if not isinstance(info, dict):
            self.stats.malformed_lines += 1
            yield ParseError(line, "token_count 'info' must be an object or null")
            return
        self.stats.usage_lines += 1
        if self._replay is not None:
            yield from self._replayed_history(info, entry, line)
            return
        yield from self._token_count(info, entry, line)

    def _replayed_history(self, info: dict, entry: dict, line: int) -> Iterator:
        """A spawned subagent's rollout opens by replaying its parent's token history,
        stamped in one second (as ccusage's detect_subagent_replay_second reads it): when
        its first two usage events share a second, the events of that second are the
        parent's; they add nothing, and the child's totals go on from them."""
        second = str(entry.get("timestamp") or "")[:19]
        replay = self._replay
        if replay["second"] is None:
            replay["second"], replay["held"] = second, (info, entry, line)
            return
        held = replay.pop("held", None)
        if second == replay["second"] and second:
            if held is not None:
                yield from self._token_count(*held, replayed=True)
            yield from self._token_count(info, entry, line, replayed=True)
            return
        self._replay = None  # no replay, or its end: the child's own events
        if held is not None:
            yield from self._token_count(*held)
        yield from self._token_count(info, entry, line)

    def _token_count(self, info: dict, entry: dict, line: int, replayed: bool = False) -> Iterator:
        totals = _usage(info.get("total_token_usage"))
        last = _usage(info.get("last_token_usage"))
        if totals is None and last is None:
            self.stats.malformed_lines += 1
            yield ParseError(
                line, "token_count without usable total_token_usage or last_token_usage"
            )
            return
        if isinstance(totals, str) or isinstance(last, str):
            self.stats.malformed_lines += 1
            yield ParseError(line, totals if isinstance(totals, str) else last)
            return
        if info.get("model"):
            self._model = str(info["model"])
        previous = self._previous_totals
        usage = None
        key = ""
        if totals is not None and previous is not None:
            delta = {k: totals[k] - previous[k] for k in USAGE_FIELDS}
            if all(v == 0 for v in delta.values()) or sum(delta.values()) == 0:
                self.stats.duplicates_dropped += 1  # a re-emit or a non-billable marker
                return
            if all(v >= 0 for v in delta.values()):
                usage = delta
                key = f"total:{totals['input_tokens'] + totals['output_tokens']}"
        elif totals is not None:
            usage = totals
            key = f"total:{totals['input_tokens'] + totals['output_tokens']}"
        if usage is None:
            if last is None or (last["input_tokens"] == 0 and last["output_tokens"] == 0):
                self.stats.duplicates_dropped += 1
                if totals is not None:
                    self._previous_totals = totals
                return
            usage = last
            key = f"line:{line}"
        if totals is not None:
            self._previous_totals = totals
        context = last["input_tokens"] if last is not None else usage["input_tokens"]
        if replayed:
            self._last_context = context
            self.stats.duplicates_dropped += 1
            return
        yield from self._call(key, usage, context, entry, line)

    def _usage_record(self, payload: dict, entry: dict, line: int) -> Iterator:
        self.stats.usage_lines += 1
        thread_id = str(payload.get("thread_id") or "")
        response_id = str(payload.get("response_id") or "")
        usage = _usage(payload.get("usage"))
        if usage is None or isinstance(usage, str):
            self.stats.malformed_lines += 1
            yield ParseError(
                line, usage if isinstance(usage, str) else "token_usage_record without 'usage'"
            )
            return
        if not response_id:
            self.stats.malformed_lines += 1
            yield ParseError(line, "token_usage_record without 'response_id'")
            return
        if not self._records_mode:
            self._records_mode = True
        if (thread_id, response_id) in self._seen_records:
            self.stats.duplicates_dropped += 1
            return
        self._seen_records.add((thread_id, response_id))
        attribution = (
            payload.get("attribution") if isinstance(payload.get("attribution"), dict) else {}
        )
        if attribution.get("model"):
            self._model = str(attribution["model"])
        yield from self._call(
            f"response:{thread_id}:{response_id}", usage, usage["input_tokens"], entry, line
        )

    def _call(self, key: str, usage: dict, context: int, entry: dict, line: int) -> Iterator:
        timestamp = parse_timestamp(entry.get("timestamp"))
        if timestamp is None:
            self.stats.malformed_lines += 1
            yield ParseError(
                line, f"field 'timestamp' is missing or not ISO-8601: {entry.get('timestamp')!r}"
            )
            return
        cached = usage["cached_input_tokens"]
        writes = usage["cache_write_input_tokens"]
        record = CallRecord(
            harness=HARNESS,
            session_id=self.session_id,
            agent_id="main",
            key=key,
            timestamp=timestamp,
            model=self._model,
            input_tokens=max(0, usage["input_tokens"] - cached - writes),
            cache_creation_tokens=writes,
            cache_read_tokens=cached,
            output_tokens=usage["output_tokens"],
            reasoning_tokens=usage["reasoning_output_tokens"],
            context_tokens=context,
            line=line,
            signature=self._signature,
            touches=self._touches,
            text={"blocks": self._buffer},
        )
        if self._prompt:
            record.text["prompt"] = self._prompt
            self._prompt = ""
        for block in self._buffer:
            if block.get("type") == "tool_use" and block.get("id"):
                self._tool_owner[block["id"]] = record
        self._buffer, self._signature, self._touches = [], [], []
        self._last_context = context
        self.stats.calls += 1
        self._held.append(record)
        yield from self._release(HOLD_CALLS)

    def _compacted(self, payload: dict, entry: dict, line: int) -> Iterator:
        yield from self._release(0)
        message = payload.get("message")
        summary = estimate_tokens(message) if isinstance(message, str) and message else None
        self.stats.compactions += 1
        yield CompactionRecord(
            harness=HARNESS,
            session_id=self.session_id,
            agent_id="main",
            key=f"compacted:{entry.get('timestamp') or line}",
            timestamp=parse_timestamp(entry.get("timestamp")),
            trigger="unknown",
            line=line,
            pre_tokens=self._last_context,
            summary_tokens=summary,
            summary_estimated=summary is not None,
        )

    def _release(self, keep: int) -> Iterator[CallRecord]:
        while len(self._held) > keep:
            record = self._held.pop(0)
            for block in record.text.get("blocks", []):
                if block.get("type") == "tool_use":
                    self._tool_owner.pop(block.get("id"), None)
            yield record


def _usage(value) -> dict | str | None:
    """The usage fields as ints, None if absent, or an error message if malformed."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return "usage must be an object"
    result = {}
    for name in USAGE_FIELDS:
        number = value.get(name, 0)
        if number is None:
            number = 0
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            return f"usage field {name!r} must be a non-negative integer, got {number!r}"
        result[name] = number
    return result


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)
