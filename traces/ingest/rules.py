"""What an ingest adds up to (`IngestSummary`, merged across files and workers), and
the rules a record is stored by: values fitted to their columns, session info merged."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from traces.formats.records import (
    AgentInfo,
    CallRecord,
    CompactionRecord,
    SessionInfo,
)

SESSION_ID_LENGTH = 200  # Session.external_id's max_length


@dataclass
class IngestSummary:
    """What one ingest added. `as_dict()` is the CLI's --json shape."""

    files: int = 0
    sessions: int = 0
    agents: int = 0
    calls: int = 0
    duplicates_dropped: int = 0
    malformed_lines: int = 0
    compactions: int = 0
    input: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output: int = 0
    errors: list[dict] = field(default_factory=list)
    skipped_files: int = 0
    derived_sessions: set[int] = field(default_factory=set)  # derived by their loader

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "sessions": self.sessions,
            "agents": self.agents,
            "calls": self.calls,
            "duplicates_dropped": self.duplicates_dropped,
            "malformed_lines": self.malformed_lines,
            "compactions": self.compactions,
            "tokens": {
                "input": self.input,
                "cache_creation": self.cache_creation,
                "cache_read": self.cache_read,
                "output": self.output,
            },
            "errors": self.errors,
        }

    def merge(self, other: IngestSummary) -> None:
        for name in (
            "files", "sessions", "agents", "calls", "duplicates_dropped", "malformed_lines",
            "compactions", "input", "cache_creation", "cache_read", "output", "skipped_files",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.extend(other.errors)
        self.derived_sessions |= other.derived_sessions

    def counts(self) -> dict:
        data = self.as_dict()
        tokens = data.pop("tokens")
        data.pop("errors")
        data.update({f"tokens_{k}": v for k, v in tokens.items()})
        data["files_already_ingested"] = self.skipped_files
        return data


KEY_LENGTH = 300  # Call.key and Compaction.key
_TEXT_FIELDS = {
    CallRecord: ("session_id", "agent_id", "key", "model"),
    CompactionRecord: ("session_id", "agent_id", "key"),
    SessionInfo: ("external_id", "project", "git_branch", "harness_version", "title"),
    AgentInfo: ("session_id", "agent_id", "parent_agent_id", "agent_type", "description",
                "spawn_tool_call_id"),
}  # fmt: skip


# Identifiers longer than their column: (field, column length).
_ID_LENGTHS = (
    ("key", KEY_LENGTH),
    ("session_id", SESSION_ID_LENGTH),
    ("external_id", SESSION_ID_LENGTH),
    ("agent_id", SESSION_ID_LENGTH),  # Agent.external_id
    ("parent_agent_id", SESSION_ID_LENGTH),
)


def _fit_for_columns(record) -> None:
    """Make a record's strings storable: PostgreSQL text cannot hold NUL (it becomes
    U+FFFD), and an identifier longer than its column keeps a prefix and a digest of the
    whole, so that two long identifiers sharing a prefix stay two."""
    fields = _TEXT_FIELDS.get(type(record), ())
    for name in fields:
        value = getattr(record, name)
        if value and "\x00" in value:
            setattr(record, name, value.replace("\x00", "\ufffd"))
    for name, length in _ID_LENGTHS:
        value = getattr(record, name, None) if name in fields else None
        if value is not None and len(value) > length:
            setattr(record, name, _shortened(value, length))


def _needs_fitting(call: CallRecord) -> bool:
    """The common case, inlined: a call whose strings are all storable as they are."""
    return (
        len(call.key) > KEY_LENGTH
        or len(call.session_id) > SESSION_ID_LENGTH
        or len(call.agent_id) > SESSION_ID_LENGTH
        or "\x00" in call.key
        or "\x00" in call.session_id
        or "\x00" in call.agent_id
        or "\x00" in call.model
    )


def _shortened(value: str, length: int) -> str:
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{value[: length - len(digest) - 1]}#{digest}"


def _merge_info(previous: SessionInfo | None, new: SessionInfo) -> SessionInfo:
    if previous is None:
        return new
    for name in ("project", "git_branch", "harness_version", "title"):
        if getattr(new, name):
            setattr(previous, name, getattr(new, name))
    return previous
