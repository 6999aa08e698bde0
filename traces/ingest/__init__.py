"""Load parsed trace records into the database, idempotently and in batches.

Each batch is its own transaction and every write is keyed by a natural key
(session + call key, session + compaction key), so a killed worker leaves no half state
and a retry finishes the job. Calls are upserted keeping the larger `output_tokens`
(the streaming rule across batches and files); on PostgreSQL they are bulk-loaded with
COPY into a staging table and merged with INSERT … ON CONFLICT.

Three modules: `loader` (TraceLoader: feeding, sessions and agents), `writes` (its
flushing half, the SQL and COPY row writing) and `rules` (IngestSummary, column fitting,
session info merging). Every name is re-exported here, so `from traces.ingest import X`
keeps working; a test that monkeypatches a module-level name patches it on the module
that reads it (e.g. `traces.ingest.loader.BATCH_SIZE`).
"""

from traces.ingest.loader import (
    BATCH_SIZE,
    LOADED_DERIVE_MAX_CALLS,
    TraceLoader,
)
from traces.ingest.rules import (
    _ID_LENGTHS,
    _TEXT_FIELDS,
    KEY_LENGTH,
    SESSION_ID_LENGTH,
    IngestSummary,
    _fit_for_columns,
    _merge_info,
    _needs_fitting,
    _shortened,
)
from traces.ingest.writes import (
    CALL_COLUMNS,
    CALL_TYPES,
    KEPT_LINE_RULE,
    STORED_COLUMNS,
    TEXT_COMPRESSOR_LEVEL,
    TEXT_TYPES,
    UPDATED_ON_CONFLICT,
    BatchWriter,
    _apply_session_info,
    _get_or_create,
    _insert_missing,
    _replaces_stored,
    _storable,
    _touch_line,
    decompress_text,
    tool_columns,
)

__all__ = [
    "BATCH_SIZE",
    "CALL_COLUMNS",
    "CALL_TYPES",
    "KEPT_LINE_RULE",
    "KEY_LENGTH",
    "LOADED_DERIVE_MAX_CALLS",
    "SESSION_ID_LENGTH",
    "STORED_COLUMNS",
    "TEXT_COMPRESSOR_LEVEL",
    "TEXT_TYPES",
    "UPDATED_ON_CONFLICT",
    "_ID_LENGTHS",
    "_TEXT_FIELDS",
    "BatchWriter",
    "IngestSummary",
    "TraceLoader",
    "_apply_session_info",
    "_fit_for_columns",
    "_get_or_create",
    "_insert_missing",
    "_merge_info",
    "_needs_fitting",
    "_replaces_stored",
    "_shortened",
    "_storable",
    "_touch_line",
    "decompress_text",
    "tool_columns",
]
