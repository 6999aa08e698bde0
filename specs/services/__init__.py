"""Writes for specifications, versions, reviews and restart packages. Atomic and audited.

One module per entity; everything a caller uses is re-exported here. Services raise the
`governance.errors` classes (field errors through `InputError.for_fields`).
"""

from specs.inputs import SourceInput, VerificationInput
from specs.services._common import SelfReviewRefused, SpecConflict, StaleBase
from specs.services.packages import restart_package_create, text_blob_store
from specs.services.specs import spec_create, spec_update
from specs.services.survival import (
    survival_audit_job_run,
    survival_audit_run,
    survival_audits_run,
    survival_verdict_correct,
)
from specs.services.versions import (
    spec_version_approve,
    spec_version_create,
    spec_version_discard,
    spec_version_import,
    spec_version_reject,
    spec_version_submit,
    spec_version_update,
)

__all__ = [
    "SelfReviewRefused",
    "SourceInput",
    "SpecConflict",
    "StaleBase",
    "VerificationInput",
    "restart_package_create",
    "spec_create",
    "spec_update",
    "spec_version_approve",
    "spec_version_create",
    "spec_version_discard",
    "spec_version_import",
    "spec_version_reject",
    "spec_version_submit",
    "spec_version_update",
    "survival_audit_job_run",
    "survival_audit_run",
    "survival_audits_run",
    "survival_verdict_correct",
    "text_blob_store",
]
