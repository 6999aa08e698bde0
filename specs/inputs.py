"""Input types the spec services take, shared with the selectors and forms that build
them (here, so that neither imports the other for a type)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class SourceInput:
    kind: str  # SourceKind
    trace_session: object | None = None
    run: object | None = None
    divergence: object | None = None
    url: str = ""
    label: str = ""


@dataclass(frozen=True)
class VerificationInput:
    command: str
    exit_status: int
    commit: str
    output: str
    ran_at: datetime | None = None
