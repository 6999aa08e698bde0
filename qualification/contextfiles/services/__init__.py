"""Writes for context files, one module per entity: imports and revisions, the ledger,
listings with verifications and drift checks, evaluations (registration and its lock), and
trials with decision records. Every change is audited.

Every name is re-exported here, so `from qualification.contextfiles.services import X` and
`services.X` keep working.
"""

from qualification.contextfiles.services.evaluations import (
    COST_MEASURES,
    REGISTRATION_FIELDS,
    SMALL_TASK_SET,
    ChangeResult,
    Registration,
    evaluation_change,
    evaluation_register,
)
from qualification.contextfiles.services.files import (
    MAX_FILE_BYTES,
    ImportResult,
    context_file_import,
    context_file_update_settings,
)
from qualification.contextfiles.services.ledger import (
    CARRIED_FIELDS,
    LEDGER_FIELDS,
    instruction_update_ledger,
)
from qualification.contextfiles.services.listings import (
    MAX_LISTING_BYTES,
    MAX_OUTPUT_CHARS,
    command_verification_record,
    drift_check_run,
    drift_check_start,
    listing_upload,
)
from qualification.contextfiles.services.trials import (
    TrialUploadError,
    TrialUploadResult,
    decision_record,
    trials_record,
)

__all__ = [
    "CARRIED_FIELDS",
    "COST_MEASURES",
    "LEDGER_FIELDS",
    "MAX_FILE_BYTES",
    "MAX_LISTING_BYTES",
    "MAX_OUTPUT_CHARS",
    "REGISTRATION_FIELDS",
    "SMALL_TASK_SET",
    "ChangeResult",
    "ImportResult",
    "Registration",
    "TrialUploadError",
    "TrialUploadResult",
    "command_verification_record",
    "context_file_import",
    "context_file_update_settings",
    "decision_record",
    "drift_check_run",
    "drift_check_start",
    "evaluation_change",
    "evaluation_register",
    "instruction_update_ledger",
    "listing_upload",
    "trials_record",
]
