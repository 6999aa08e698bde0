"""Writes for annotations, one module per entity: marks (`marks.py`) and queues (`queues.py`).

Every change is atomic and audited. Bad input raises `InputError` naming the field that is
wrong (the API answers 400 with it; pages show it on the field); a missing role `Forbidden`.
"""

from traces.annotations.services.marks import (
    ADJUDICATE_ROLE,
    ANNOTATE_ROLE,
    MAX_EVIDENCE,
    MAX_NOTE,
    MAX_OTHER_TEXT,
    divergence_adjudicate,
    divergence_mark,
    divergence_mark_errors,
    locate_call,
    other_text_from_note,
)
from traces.annotations.services.queues import (
    MAX_SAMPLE,
    QUEUE_BUILD_ROLE,
    queue_build,
    queue_next,
    queue_no_divergence,
    queue_set_status,
    queue_skip,
)

__all__ = [
    "ADJUDICATE_ROLE",
    "ANNOTATE_ROLE",
    "MAX_EVIDENCE",
    "MAX_NOTE",
    "MAX_OTHER_TEXT",
    "MAX_SAMPLE",
    "QUEUE_BUILD_ROLE",
    "divergence_adjudicate",
    "divergence_mark",
    "divergence_mark_errors",
    "locate_call",
    "other_text_from_note",
    "queue_build",
    "queue_next",
    "queue_no_divergence",
    "queue_set_status",
    "queue_skip",
]
