"""User and system lines of a Claude Code transcript: prompts, tool results, compaction
boundaries and summaries. No Django."""

from __future__ import annotations

from traces.formats.claude_code.common import (
    HARNESS,
    MAX_RESULT_CHARS,
    _int_or_none,
    _text_of,
    parse_timestamp,
)
from traces.formats.records import (
    CompactionRecord,
    estimate_tokens,
)


class UserSystemLines:
    """The parser's handling of user and system lines; a part of `ClaudeCodeParser`, whose
    state it uses."""

    def _user(self, entry: dict, line: int, session_id: str, agent_id: str) -> None:
        message = entry.get("message")
        content = message.get("content") if type(message) is dict else None
        if entry.get("isCompactSummary"):
            text = content if type(content) is str else _text_of(content)
            self._compact_summary(entry, line, text, session_id, agent_id)
            return
        self.stats.ignored_lines += 1
        prompt = ""
        if type(content) is list:
            texts = []
            for block in content:
                if type(block) is dict:
                    kind = block.get("type")
                    if kind == "tool_result":
                        self._attach_result(block)
                    elif kind == "text":
                        texts.append(block)
            if texts:
                prompt = _text_of(texts)
        elif type(content) is str:
            prompt = content
        if prompt and not entry.get("isMeta"):
            self._prompts[agent_id] = prompt[:MAX_RESULT_CHARS]

    def _attach_result(self, block: dict) -> None:
        tool_id = block.get("tool_use_id")
        slot = self._tool_owner.pop(tool_id, None) if type(tool_id) is str else None
        pending = self._pending.get(slot) if slot else None
        if pending is None:
            return
        raw = block.get("content")
        text = raw if type(raw) is str else _text_of(raw)
        results = pending.record.text.get("results")
        if results is None:
            results = pending.record.text["results"] = {}
        results[tool_id] = {
            "content": text[:MAX_RESULT_CHARS] if len(text) > MAX_RESULT_CHARS else text,
            "is_error": bool(block.get("is_error")),
            "truncated_chars": max(0, len(text) - MAX_RESULT_CHARS),
        }
        pending.open_tools.discard(tool_id)
        if not pending.open_tools and self._latest.get(pending.thread) != slot:
            self._ready[slot] = None

    def _system(self, entry: dict, line: int, session_id: str, agent_id: str) -> None:
        subtype = entry.get("subtype")
        if subtype != "compact_boundary" and subtype != "microcompact_boundary":
            self.stats.ignored_lines += 1
            return
        if self._open_compaction is not None:
            self._out.append(self._open_compaction)
        micro = subtype == "microcompact_boundary"
        meta = entry.get("microcompactMetadata" if micro else "compactMetadata")
        if type(meta) is not dict:
            meta = (
                entry.get("compact_metadata") if type(entry.get("compact_metadata")) is dict else {}
            )
        trigger = meta.get("trigger")
        self.stats.compactions += 1
        self._open_compaction = CompactionRecord(
            harness=HARNESS,
            session_id=session_id,
            agent_id=agent_id,
            key=f"boundary:{entry.get('uuid') or line}",
            timestamp=parse_timestamp(entry.get("timestamp")),
            trigger=trigger if trigger in {"auto", "manual"} else "unknown",
            line=line,
            kind="micro" if micro else "full",
            pre_tokens=_int_or_none(meta.get("preTokens", meta.get("pre_tokens"))),
            post_tokens=_int_or_none(meta.get("postTokens", meta.get("post_tokens"))),
            duration_ms=_int_or_none(meta.get("durationMs")),
        )

    def _compact_summary(
        self, entry: dict, line: int, text: str, session_id: str, agent_id: str
    ) -> None:
        compaction = self._open_compaction
        if compaction is None:
            # Old builds wrote only the summary message: the boundary is implied.
            self.stats.compactions += 1
            compaction = CompactionRecord(
                harness=HARNESS,
                session_id=session_id,
                agent_id=agent_id,
                key=f"summary:{entry.get('uuid') or line}",
                timestamp=parse_timestamp(entry.get("timestamp")),
                trigger="unknown",
                line=line,
            )
        if text and compaction.summary_tokens is None:
            compaction.summary_tokens = estimate_tokens(text)
            compaction.summary_estimated = True
        if text:
            self._summaries[agent_id] = text[:MAX_RESULT_CHARS]
        self._open_compaction = None
        self._out.append(compaction)
