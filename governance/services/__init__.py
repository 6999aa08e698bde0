"""Writes for the core, one module per entity: workspaces and members, invitations, API
tokens, the audit log and jobs. Everything a caller uses is re-exported here."""

from governance.errors import Conflict, Gone, InputError
from governance.services.audit import (
    audit_record,
)
from governance.services.invitations import (
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_revoke,
    invitee_normalize,
    workspace_lock,
)
from governance.services.jobs import (
    MAX_JOB_ERRORS,
    JobHeartbeat,
    JobReporter,
    StaleJobsSwept,
    job_create,
    job_enqueue,
    job_run,
    jobs_requeue_stale,
    task_named,
    too_many_files_message,
)
from governance.services.tokens import (
    LAST_USED_RESOLUTION_SECONDS,
    TOKEN_PREFIX,
    IssuedToken,
    TokenRejected,
    api_token_authenticate,
    api_token_create,
    api_token_revoke,
    token_hash,
)
from governance.services.validation import full_clean
from governance.services.workspaces import (
    membership_remove,
    membership_set,
    user_get_or_create,
    workspace_bump_data_version,
    workspace_create,
)

__all__ = [
    "LAST_USED_RESOLUTION_SECONDS",
    "MAX_JOB_ERRORS",
    "TOKEN_PREFIX",
    "Conflict",
    "Gone",
    "InputError",
    "IssuedToken",
    "JobHeartbeat",
    "JobReporter",
    "StaleJobsSwept",
    "TokenRejected",
    "api_token_authenticate",
    "api_token_create",
    "api_token_revoke",
    "audit_record",
    "full_clean",
    "invitation_accept",
    "invitation_create",
    "invitation_decline",
    "invitation_revoke",
    "invitee_normalize",
    "job_create",
    "job_enqueue",
    "job_run",
    "jobs_requeue_stale",
    "membership_remove",
    "membership_set",
    "task_named",
    "token_hash",
    "too_many_files_message",
    "user_get_or_create",
    "workspace_bump_data_version",
    "workspace_create",
    "workspace_lock",
]
