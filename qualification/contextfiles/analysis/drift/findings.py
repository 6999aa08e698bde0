"""A drift finding, its severities and the thresholds the checks share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ERROR, WARNING, INFO = "error", "warning", "info"
STALE_VERIFICATION_DAYS = 90
DUPLICATE_SIMILARITY = 0.9
MIN_FINGERPRINT_LENGTH = 7


@dataclass(frozen=True)
class Finding:
    check: str  # counts, paths, commands, generated, contradictions, duplicates
    severity: str
    message: str
    line: int | None = None
    position: int | None = None  # the instruction's position in its revision
    data: dict = field(default_factory=dict)


# Inline code spans, which the checks read apart from the prose around them.
_CODE = re.compile(r"`[^`]*`")


def _singular(noun: str) -> str:
    noun = noun.lower()
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    return noun[:-1] if noun.endswith("s") else noun
