"""Writes for qualification, one module per entity: configurations and workloads,
qualifications, trials, the analysis cache, operating limits and budget checks.

Every name is re-exported here, so `from qualification.services import X` and
`services.X` keep working. A test that monkeypatches a module-level name patches it on
the module that uses it (e.g. `services.trials`).
"""

from qualification.services.analysis import (
    ANALYSIS_JOB,
    AnalysisPending,
    analysis_get_or_request,
    analysis_request,
    qualification_analyse,
    qualification_analysis_run,
)
from qualification.services.budgets import (
    MAX_PROMPT_CHARS,
    budget_check_record,
    limit_spec,
    verdict_dict,
)
from qualification.services.configurations import (
    DEFAULT_FAMILIES,
    configuration_fingerprint,
    configuration_get_or_create,
    workload_get_or_create,
)
from qualification.services.limits import (
    APPROVAL_CONFIRMATION,
    COMMENT_MAX_CHARS,
    EDITABLE_LIMIT_FIELDS,
    operating_limit_approve,
    operating_limit_propose,
    operating_limit_update,
    operating_limit_withdraw,
    seed_004_stages,
)
from qualification.services.qualifications import (
    MAX_STRATA,
    PRE_REGISTERED,
    qualification_create,
    qualification_lock,
    qualification_update,
)
from qualification.services.trials import (
    TRIAL_INSERT_BATCH,
    UPLOAD_JOB,
    _check_against_database,
    _SavedRowsProgress,
    trial_batch_submit,
    trial_upload_process,
)

__all__ = [
    "ANALYSIS_JOB",
    "APPROVAL_CONFIRMATION",
    "COMMENT_MAX_CHARS",
    "DEFAULT_FAMILIES",
    "EDITABLE_LIMIT_FIELDS",
    "MAX_PROMPT_CHARS",
    "MAX_STRATA",
    "PRE_REGISTERED",
    "TRIAL_INSERT_BATCH",
    "UPLOAD_JOB",
    "AnalysisPending",
    "_SavedRowsProgress",
    "_check_against_database",
    "analysis_get_or_request",
    "analysis_request",
    "budget_check_record",
    "configuration_fingerprint",
    "configuration_get_or_create",
    "limit_spec",
    "operating_limit_approve",
    "operating_limit_propose",
    "operating_limit_update",
    "operating_limit_withdraw",
    "qualification_analyse",
    "qualification_analysis_run",
    "qualification_create",
    "qualification_lock",
    "qualification_update",
    "seed_004_stages",
    "trial_batch_submit",
    "trial_upload_process",
    "verdict_dict",
    "workload_get_or_create",
]
