"""Mechanical drift checks on a parsed context file. Pure: parsed file (+ listing) in, findings out.

Each check is documented, with its heuristic, in docs/context-files.md:
`check_counts`, `check_paths`, `check_commands`, `check_generated`,
`check_contradictions` and `check_duplicates`, one module each; everything a caller uses is
re-exported here.
"""

from qualification.contextfiles.analysis.drift.commands import (
    NamedCommand,
    Verification,
    check_commands,
    named_commands,
    normalise_command,
)
from qualification.contextfiles.analysis.drift.contradictions import (
    TOOL_FAMILIES,
    Assertion,
    check_contradictions,
    setting_assertions,
)
from qualification.contextfiles.analysis.drift.counts import (
    COUNTED_NOUNS,
    NUMBER_WORDS,
    CountClaim,
    check_counts,
    find_claims,
)
from qualification.contextfiles.analysis.drift.duplicates import (
    check_duplicates,
)
from qualification.contextfiles.analysis.drift.findings import (
    DUPLICATE_SIMILARITY,
    ERROR,
    INFO,
    MIN_FINGERPRINT_LENGTH,
    STALE_VERIFICATION_DAYS,
    WARNING,
    Finding,
)
from qualification.contextfiles.analysis.drift.generated import (
    check_generated,
)
from qualification.contextfiles.analysis.drift.paths import (
    check_paths,
    mentioned_paths,
)

CHECKS = ("counts", "paths", "commands", "generated", "contradictions", "duplicates")

__all__ = [
    "CHECKS",
    "COUNTED_NOUNS",
    "DUPLICATE_SIMILARITY",
    "ERROR",
    "INFO",
    "MIN_FINGERPRINT_LENGTH",
    "NUMBER_WORDS",
    "STALE_VERIFICATION_DAYS",
    "TOOL_FAMILIES",
    "WARNING",
    "Assertion",
    "CountClaim",
    "Finding",
    "NamedCommand",
    "Verification",
    "check_commands",
    "check_contradictions",
    "check_counts",
    "check_duplicates",
    "check_generated",
    "check_paths",
    "find_claims",
    "mentioned_paths",
    "named_commands",
    "normalise_command",
    "setting_assertions",
]
