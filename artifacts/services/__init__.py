"""Writes for artifacts, one module per concern: the workspace policy, storing output,
retention (deletion and expiry) and bounded reads (which write the read log).

Other apps store bulk output with `artifact_write(...)`; it returns the pointer only once
the content is fully stored, and raises (storing nothing) otherwise. Every name is
re-exported here, so `from artifacts.services import X` and `services.X` keep working.
"""

from artifacts.services.policy import (
    POLICY_FIELDS,
    artifact_policy_for,
    artifact_policy_update,
)
from artifacts.services.reading import (
    Reader,
    ReadLimitExceeded,
    SearchMatch,
    SearchResult,
    artifact_open_content,
    artifact_read_head,
    artifact_read_range,
    artifact_read_tail,
    artifact_search,
    ensure_readable,
)
from artifacts.services.retention import (
    ArtifactGone,
    PurgeReport,
    artifact_delete,
    artifacts_purge,
)
from artifacts.services.writing import (
    CHUNK,
    EXIT_STATUS_RANGE,
    MAX_COMMAND,
    MAX_ID,
    ArtifactTooLarge,
    ArtifactWriter,
    StoredArtifact,
    WriteInterrupted,
    WriteMetadata,
    artifact_store,
    artifact_write,
    artifact_write_failure_record,
    check_run_scope,
)

# Raised through these services, and read as `services.X` by their callers.
from artifacts.storage import StorageFailed
from governance.services import InputError

__all__ = [
    "CHUNK",
    "EXIT_STATUS_RANGE",
    "MAX_COMMAND",
    "MAX_ID",
    "POLICY_FIELDS",
    "ArtifactGone",
    "ArtifactTooLarge",
    "ArtifactWriter",
    "InputError",
    "PurgeReport",
    "ReadLimitExceeded",
    "Reader",
    "SearchMatch",
    "SearchResult",
    "StorageFailed",
    "StoredArtifact",
    "WriteInterrupted",
    "WriteMetadata",
    "artifact_delete",
    "artifact_open_content",
    "artifact_policy_for",
    "artifact_policy_update",
    "artifact_read_head",
    "artifact_read_range",
    "artifact_read_tail",
    "artifact_search",
    "artifact_store",
    "artifact_write",
    "artifact_write_failure_record",
    "artifacts_purge",
    "check_run_scope",
    "ensure_readable",
]
