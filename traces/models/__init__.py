"""Trace models: raw uploads, sessions, agents, deduplicated calls, compactions, runs, file touches.

Calls are the table that grows with traffic. It has no foreign keys pointing into it
except from per-call text, and every read filters by session or by workspace and time,
so it can be partitioned by time without changing the code that reads it.
"""

from traces.models.hooks import HookEvent, HookPolicy, PreCompactAction
from traces.models.sessions import (
    Agent,
    AgentKind,
    Call,
    CallSource,
    CallSourceKind,
    CallText,
    Compaction,
    CompactionTrigger,
    FileTouch,
    OperatorPrompt,
    Run,
    Session,
    StartKind,
    TaskType,
    TouchMode,
)
from traces.models.telemetry import (
    IdentityHandling,
    MetricTemporality,
    TelemetryEvent,
    TelemetryMetricPoint,
    TelemetryPolicy,
    _new_identity_key,
)
from traces.models.uploads import (
    FollowedFile,
    Harness,
    IngestedFile,
    JobFile,
    RawUpload,
    UploadSource,
    raw_upload_path,
)

__all__ = [
    "Agent",
    "AgentKind",
    "Call",
    "CallSource",
    "CallSourceKind",
    "CallText",
    "Compaction",
    "CompactionTrigger",
    "FileTouch",
    "FollowedFile",
    "Harness",
    "HookEvent",
    "HookPolicy",
    "IdentityHandling",
    "IngestedFile",
    "JobFile",
    "MetricTemporality",
    "OperatorPrompt",
    "PreCompactAction",
    "RawUpload",
    "Run",
    "Session",
    "StartKind",
    "TaskType",
    "TelemetryEvent",
    "TelemetryMetricPoint",
    "TelemetryPolicy",
    "TouchMode",
    "UploadSource",
    "_new_identity_key",
    "raw_upload_path",
]
