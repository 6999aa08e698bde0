"""Labels for the codes the interface shows: job kinds, job counts and audit actions.

One mapping per vocabulary, read by the job page, the jobs list and the audit log. A code
without a label (a new one) is still shown readably: underscores and dots become words.
"""

from __future__ import annotations

JOB_KINDS = {
    "trace_ingest": "Trace upload",
    "trace_analytics": "Trace analytics refresh",
    "qualification_analysis": "Qualification analysis",
    "trial_upload": "Trial upload",
    "context_file_drift_check": "Context file drift check",
    "instruction_visibility": "Instruction visibility count",
}

JOB_COUNTS = {
    # trace ingest
    "files": "Files read",
    "files_already_ingested": "Files already ingested (skipped)",
    "sessions": "New sessions",
    "agents": "New agents",
    "calls": "Calls",
    "duplicates_dropped": "Duplicate calls dropped",
    "malformed_lines": "Malformed lines skipped",
    "compactions": "Compactions",
    "tokens_input": "Input tokens",
    "tokens_cache_creation": "Cache-write tokens",
    "tokens_cache_read": "Cache-read tokens",
    "tokens_output": "Output tokens",
    # analytics
    "data_version": "Data version",
    "step": "Step",
    "seconds": "Seconds",
    "failed_sections": "Failed sections",
    "followup_job": "Follow-up job",
    # qualification
    "trials": "Trials",
    "status": "Status",
    "rows": "Rows",
    "format": "Format",
    "unknown_fields": "Unknown fields",
    "trials_saved": "Trials saved",
    "tasks_new": "New tasks",
    "sessions_linked": "Sessions linked",
    "sessions_not_found": "Sessions not found",
    # context files
    "findings": "Findings",
    "commands": "Commands",
}

AUDIT_OBJECTS = {
    "annotation_queue": "Annotation queue",
    "api_token": "API token",
    "artifact": "Artifact",
    "artifact_policy": "Artifact policy",
    "budget_check": "Budget check",
    "command_verification": "Command verification",
    "context_file": "Context file",
    "divergence": "Divergence",
    "drift_check": "Drift check",
    "evaluation": "Evaluation",
    "instruction": "Instruction",
    "membership": "Member",
    "model_configuration": "Model configuration",
    "operating_limit": "Operating limit",
    "qualification": "Qualification",
    "repository_listing": "Repository listing",
    "restart_package": "Restart package",
    "spec": "Spec",
    "spec_version": "Spec version",
    "trace_ingest": "Traces",
    "trace_otlp": "OTLP traces",
    "trace_upload": "Trace upload",
    "trial_upload": "Trial upload",
    "workload": "Workload",
    "workspace": "Workspace",
}

AUDIT_VERBS = {
    "add": "added",
    "adjudicate": "adjudicated",
    "approve": "approved",
    "assign": "assigned",
    "build": "built",
    "cli": "ingested from the command line",
    "close": "closed",
    "create": "created",
    "decide": "decided",
    "delete": "deleted",
    "discard": "discarded",
    "expire": "expired",
    "import_revision": "revision imported",
    "lock": "locked",
    "no_divergence": "marked without divergence",
    "propose": "proposed",
    "receive": "received",
    "record": "recorded",
    "record_trials": "trials recorded",
    "register": "registered",
    "reject": "rejected",
    "remove": "removed",
    "reopen": "reopened",
    "replace": "replaced",
    "revoke": "revoked",
    "skip": "skipped",
    "start": "started",
    "submit": "submitted",
    "supersede": "superseded",
    "trials_add": "trials added",
    "update": "updated",
    "update_ledger": "ledger updated",
    "upload": "uploaded",
    "withdraw": "withdrawn",
}


def humanize_code(code: str) -> str:
    """`tokens_cache_creation` -> "Tokens cache creation": the fallback for a new code."""
    words = code.replace(".", " ").replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def job_kind_label(kind: str) -> str:
    return JOB_KINDS.get(kind) or humanize_code(kind)


def job_count_label(key: str) -> str:
    return JOB_COUNTS.get(key) or humanize_code(key)


def audit_action_label(action: str) -> str:
    """`artifact.delete` -> "Artifact deleted": the object's label, then the verb's."""
    obj, _, verb = action.partition(".")
    if obj in AUDIT_OBJECTS and verb in AUDIT_VERBS:
        return f"{AUDIT_OBJECTS[obj]} {AUDIT_VERBS[verb]}"
    return humanize_code(action)
