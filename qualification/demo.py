"""Demo data: a sweep, its requalification after a harness upgrade, an approved operating
limit, its proposed successor, and budget checks. Deterministic and idempotent."""

from __future__ import annotations

import csv
import io

from qualification import selectors, services
from qualification.analysis.simulate import simulate_sweep
from qualification.models import LimitStatus, OperatingLimit, Qualification

STRATA = [8000, 16000, 32000, 64000, 128000, 200000]
# Planted accuracy by stratum: retrieval holds up, multi-file code work declines first.
CURVES = {
    "retrieval": [0.97, 0.97, 0.97, 0.96, 0.94, 0.90],
    "aggregation": [0.96, 0.96, 0.96, 0.95, 0.87, 0.76],
    "retention": [0.97, 0.97, 0.97, 0.95, 0.88, 0.79],
    "long_code": [0.95, 0.95, 0.95, 0.94, 0.79, 0.64],
    "code_change": [0.95, 0.95, 0.95, 0.94, 0.74, 0.56],
}
# The harness upgrade adds standing instructions: the code families decline a doubling earlier.
CURVES_REQUALIFIED = {
    "retrieval": [0.97, 0.97, 0.97, 0.96, 0.93, 0.89],
    "aggregation": [0.96, 0.96, 0.96, 0.93, 0.84, 0.73],
    "retention": [0.97, 0.97, 0.97, 0.94, 0.85, 0.75],
    "long_code": [0.95, 0.95, 0.95, 0.80, 0.66, 0.55],
    "code_change": [0.95, 0.95, 0.94, 0.76, 0.60, 0.48],
}
FAILURES = {
    "retrieval": ["retrieval_failure", "stale_or_conflicting_evidence"],
    "aggregation": ["retrieval_failure", "incorrect_symbol_relationships"],
    "retention": ["forgotten_constraint", "repetition"],
    "long_code": ["incorrect_symbol_relationships", "hallucinated_reference"],
    "code_change": ["under_changed_fix", "over_broad_change", "forgotten_constraint"],
}
FIRST = "Sonnet 4 on repo maintenance (May)"
SECOND = "Sonnet 4 on repo maintenance (harness 1.1 requalification)"
MODEL = {"name": "claude-sonnet-4", "version": "2025-05-14"}
WORKLOAD = {"name": "repo-maintenance", "version": "3"}
CONFIG = {
    "decoding": {"temperature": 0, "max_output_tokens": 8192},
    "harness_version": "claude-code 1.0.31",
    "prompt_version": "agent-prompt v7",
    "evaluator_version": "patch-eval 2.3",
}


def _csv(rows: list[dict], seed: int) -> bytes:
    columns = [
        "task_id", "family", "stratum_tokens", "repeat", "retrieval_correct", "task_correct",
        "input_tokens", "output_tokens", "model_calls", "tool_calls", "cost_usd", "latency_ms",
        "failure_class",
    ]  # fmt: skip
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for index, row in enumerate(rows):
        if not row["task_correct"]:
            options = FAILURES[row["family"]]
            row = {**row, "failure_class": options[(index + seed) % len(options)]}
        writer.writerow(row)
    return buffer.getvalue().encode()


def _sweep(*, name, curves, config, seed, supersedes, users, stdout) -> Qualification:
    existing = Qualification.objects.filter(workspace=users["_workspace"], name=name).first()
    if existing is not None:
        return existing
    qualification = services.qualification_create(
        workspace=users["_workspace"],
        name=name,
        model=MODEL,
        configuration=config,
        workload={**WORKLOAD, "families": list(CURVES)},
        threshold=0.85,
        consequence="medium",
        strata=STRATA,
        supersedes=supersedes,
        notes="Paired tasks from the repo-maintenance workload: the same 40 tasks per family "
        "at every context size, with neighbouring files, test output and discussion added in a "
        "recorded order. Five independent repeats per cell.",
        actor=users["editor"],
    )
    rows = simulate_sweep(curves, STRATA, tasks=40, repeats=5, seed=seed, task_spread=0.6)
    upload = services.trial_batch_submit(
        qualification=qualification,
        content=_csv(rows, seed),
        filename=f"sweep-{seed}.csv",
        source="demo",
        actor=users["editor"],
        run_now=True,
    )
    stdout.write(f"  {name}: {upload.rows_loaded} trials")
    services.qualification_analyse(qualification=qualification)
    return qualification


def seed(*, workspace, users, stdout) -> None:
    users = {**users, "_workspace": workspace}
    first = _sweep(
        name=FIRST, curves=CURVES, config=CONFIG, seed=1, supersedes=None, users=users,
        stdout=stdout,
    )  # fmt: skip
    limit = OperatingLimit.objects.filter(workspace=workspace, qualification=first).first()
    if limit is None:
        limit = services.operating_limit_propose(
            qualification=first,
            actor=users["editor"],
            name="Repo maintenance agents (Sonnet 4)",
            values={
                "reserve_action": "restart_from_spec",
                "source_limits": {
                    "system": 3000,
                    "tool_schemas": 4000,
                    "retrieved_files": 14000,
                    "history": 6000,
                    "memory": 1000,
                },
                "rationale": "Medium consequence: patches are reviewed and CI runs the tests, but "
                "a wrong patch costs a reviewer's hour. ×0.75 of the weakest family's knee, "
                "rounded down to a tested stratum.",
            },
            use_stage_template=True,
        )
    if limit.status == LimitStatus.PROPOSED:
        limit = services.operating_limit_approve(
            limit=limit,
            reviewer=users["reviewer"],
            membership=workspace.memberships.get(user=users["reviewer"]),
            confirmed=True,
            comment="Checked the margin against the code-change knee; stage budgets as seed 004.",
        )
    if not limit.audits.exists():
        _budget_checks(limit, users)
    second_config = {**CONFIG, "harness_version": "claude-code 1.1.0"}
    second = _sweep(
        name=SECOND, curves=CURVES_REQUALIFIED, config=second_config, seed=9, supersedes=first,
        users=users, stdout=stdout,
    )  # fmt: skip
    if not OperatingLimit.objects.filter(workspace=workspace, qualification=second).exists():
        result = selectors.analysis_current(qualification=second).result
        if result["proposed_limit_tokens"]:
            services.operating_limit_propose(
                qualification=second,
                actor=users["editor"],
                name="Repo maintenance agents (Sonnet 4, harness 1.1)",
                values={
                    "reserve_action": "restart_from_spec",
                    "source_limits": {
                        "system": 3000,
                        "tool_schemas": 3000,
                        "retrieved_files": 6000,
                    },
                    "rationale": "Harness 1.1 adds standing instructions; code change declines a "
                    "doubling earlier, so the limit follows it down.",
                },
            )
    stdout.write(
        f"  qualifications #{first.pk} and #{second.pk}; limit #{limit.pk} approved, "
        "its successor awaits review"
    )


def _budget_checks(limit: OperatingLimit, users) -> None:
    checks = [
        ({"system": 2600, "tool_schemas": 3700, "retrieved_files": 9800, "history": 2100}, "", [],
         "ticket-4801"),
        ({"system": 2600, "tool_schemas": 3700, "retrieved_files": 17800, "history": 3100}, "",
         [{"decision": "omitted", "source": "retrieved_files", "item": "package-lock.json",
           "tokens": 41200, "reason": "lockfile"}], "ticket-4807"),
        ({"system": 2600, "tool_schemas": 3700, "retrieved_files": 12500, "history": 800},
         "code_generation", [{"decision": "truncated", "source": "retrieved_files",
                              "item": "src/billing/invoice.py", "tokens": 6100,
                              "reason": "diff window of 50 lines around the change"}],
         "ticket-4812"),
        ({"system": 2600, "tool_schemas": 3700, "retrieved_files": 13900, "history": 5400,
          "memory": 900}, "code_generation", [], "ticket-4815"),
        ({"system": 1200, "history": 2100}, "ticket_parsing", [], "ticket-4816"),
        ({"system": 2600, "retrieved_files": 7400, "history": 1900}, "file_selection",
         ["skeletonised 11 sibling files to signatures"], "ticket-4816"),
    ]  # fmt: skip
    for allocation, stage, omissions, run in checks:
        services.budget_check_record(
            limit=limit,
            allocation=allocation,
            stage=stage,
            omissions=omissions,
            run_ref=run,
            assembled_prompt=""
            if stage != "ticket_parsing"
            else "You are the ticket parser.\n\nTicket 4816: Invoices rounded twice when a "
            "discount applies.\n…",
            source="demo",
            actor=users["editor"],
        )
