"""Assistant lines of a Claude Code transcript: one call's streamed blocks, deduplicated and
merged (see the package docstring). No Django."""

from __future__ import annotations

from traces.formats.claude_code.common import (
    HARNESS,
    RECENT_KEYS,
    SPAWN_TOOLS,
    USAGE_FIELDS,
    _Pending,
    parse_timestamp,
)
from traces.formats.records import (
    CallRecord,
)
from traces.formats.tools import signature_and_touches


class AssistantLines:
    """The parser's handling of assistant lines; a part of `ClaudeCodeParser`, whose state
    it uses."""

    def _assistant(self, entry: dict, line: int, session_id: str, agent_id: str) -> None:
        message = entry.get("message")
        if type(message) is not dict:
            self._error(line, "assistant record without a 'message' object")
            return
        usage = message.get("usage")
        if type(usage) is not dict:
            self.stats.ignored_lines += 1
            return
        self.stats.usage_lines += 1
        get = usage.get
        uncached = get("input_tokens", 0)
        cache_creation = get("cache_creation_input_tokens", 0)
        cache_read = get("cache_read_input_tokens", 0)
        output = get("output_tokens", 0)
        if not (
            type(uncached) is int
            and type(cache_creation) is int
            and type(cache_read) is int
            and type(output) is int
            and uncached >= 0
            and cache_creation >= 0
            and cache_read >= 0
            and output >= 0
        ):
            counts = self._usage_counts(usage, line)  # nulls count as 0; anything else is an error
            if counts is None:
                return
            uncached, cache_creation, cache_read, output = counts
        breakdown = usage.get("cache_creation")
        hour_writes = 0
        if type(breakdown) is dict:
            five = breakdown.get("ephemeral_5m_input_tokens")
            hour = breakdown.get("ephemeral_1h_input_tokens")
            if type(five) is int and type(hour) is int and five >= 0 and hour >= 0 and five + hour:
                # The breakdown is the billed split (ccusage counts it the same way).
                cache_creation = five + hour
                hour_writes = hour
        model = message.get("model") or ""
        if model == "<synthetic>":
            self.stats.ignored_lines += 1  # a locally generated error, not an API call
            return
        sidechain = agent_id != "main" or bool(entry.get("isSidechain"))
        key = self._key_for(message, entry, sidechain, line, session_id)
        slot = (session_id, key)
        context = uncached + cache_creation + cache_read
        pending = self._pending.get(slot)
        if pending is None:
            raw_time = entry.get("timestamp")
            timestamp = parse_timestamp(raw_time)
            if timestamp is None:
                self._error(line, f"field 'timestamp' is missing or not ISO-8601: {raw_time!r}")
                return
            record = CallRecord(
                HARNESS, session_id, agent_id, key, timestamp, str(model), uncached, cache_creation,
                cache_read, output, 0, context, line, sidechain,
            )  # fmt: skip
            record.cache_creation_1h_tokens = hour_writes
            if hash(slot) in self._emitted:
                # A late line of a call already emitted: the loader merges it with the stored
                # call by the same rule, and counts it as a duplicate.
                record.reemitted = True
            pending = _Pending(record, sidechain, line, (session_id, agent_id))
            prompt = self._prompts.pop(agent_id, None) if self._prompts else None
            if prompt:
                record.text["prompt"] = prompt
            summary = self._summaries.pop(agent_id, None) if self._summaries else None
            if summary:
                # The summary is what the model continued from: a reader needs to see it.
                record.text["summary"] = summary
            self._pending[slot] = pending
        else:
            self.stats.duplicates_dropped += 1
            self._pending.move_to_end(slot)
            pending.last_line = line
            record = pending.record
            if (pending.sidechain and not sidechain) or (
                pending.sidechain == sidechain and output >= record.output_tokens
            ):
                record.model = str(model) or record.model
                record.input_tokens = uncached
                record.cache_creation_tokens = cache_creation
                record.cache_creation_1h_tokens = hour_writes
                record.cache_read_tokens = cache_read
                record.output_tokens = output
                record.context_tokens = context
                record.is_sidechain = sidechain
                pending.sidechain = sidechain
        thread = (session_id, agent_id)
        previous = self._latest.get(thread)
        if previous != slot:
            self._latest[thread] = slot
            if previous is not None:
                other = self._pending.get(previous)
                if other is not None and not other.open_tools:
                    self._ready[previous] = None
        self._ready.pop(slot, None)
        content = message.get("content")
        if content:
            self._merge_blocks(pending, content, slot, agent_id)

    def _usage_counts(self, usage: dict, line: int) -> list[int] | None:
        counts = []
        for name in USAGE_FIELDS:
            value = usage.get(name, 0)
            if value is None:
                value = 0
            elif type(value) is not int or value < 0:
                self._error(
                    line,
                    f"field 'message.usage.{name}' must be a non-negative integer, got {value!r}",
                )
                return None
            counts.append(value)
        return counts

    def _key_for(
        self, message: dict, entry: dict, sidechain: bool, line: int, session_id: str
    ) -> str:
        message_id = message.get("id")
        if type(message_id) is not str or not message_id:
            # Its own call. A line number alone is not unique in a session: its subagent
            # files number their lines too.
            uuid = entry.get("uuid")
            if type(uuid) is str and uuid:
                return f"uuid:{uuid}"
            return f"line:{self.file_agent_id or 'main'}:{line}"
        request_id = entry.get("requestId")
        key = f"{message_id}:{request_id}" if type(request_id) is str and request_id else message_id
        known = self._msgid_to_key.get((session_id, message_id))
        if known is None:
            self._msgid_to_key[(session_id, message_id)] = key
            if len(self._msgid_to_key) > RECENT_KEYS:
                self._msgid_to_key.pop(next(iter(self._msgid_to_key)))
        elif known != key:
            other = self._pending.get((session_id, known))
            # /btw side questions replay a message under another requestId: same call.
            if sidechain or (other is not None and other.sidechain):
                return known
            self._msgid_to_key[(session_id, message_id)] = key
        return key

    def _merge_blocks(
        self, pending: _Pending, content, slot: tuple[str, str], agent_id: str
    ) -> None:
        if type(content) is str:
            content = [{"type": "text", "text": content}]
        elif type(content) is not list:
            return
        blocks = pending.blocks
        seen = pending.block_keys  # a block repeated by a copied line is kept once
        for block in content:
            if type(block) is not dict:
                continue
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if type(text) is str and len(block) == 2:
                    copy = block  # Claude Code's text blocks hold just these keys: kept as is
                else:
                    text = text if type(text) is str else str(text or "")
                    copy = {"type": "text", "text": text}
                if text not in seen:
                    seen.add(text)
                    blocks.append(copy)
            elif kind == "tool_use":
                tool_id = str(block.get("id") or "")
                marker = ("tool_use", tool_id or len(blocks))
                if marker in seen:
                    continue
                seen.add(marker)
                name = str(block.get("name") or "")
                tool_input = block.get("input")
                blocks.append(
                    {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
                )
                token, touches = signature_and_touches(name, tool_input)
                pending.record.signature.append(token)
                if touches:
                    pending.record.touches.extend(touches)
                if tool_id:
                    pending.open_tools.add(tool_id)
                    self._tool_owner[tool_id] = slot
                if name in SPAWN_TOOLS and agent_id == "main" and type(tool_input) is dict:
                    prompt = tool_input.get("prompt")
                    if type(prompt) is str and prompt.strip():
                        self._spawn_prompts[prompt.strip()] = (
                            tool_id,
                            str(tool_input.get("description") or ""),
                            str(tool_input.get("subagent_type") or ""),
                        )
            elif kind == "thinking":
                text = str(block.get("thinking") or "")
                if ("thinking", text) not in seen:
                    seen.add(("thinking", text))
                    blocks.append({"type": "thinking", "text": text})
