"""Demo data: an AGENTS.md with three revisions, its ledger, drift findings, and a
pre-registered evaluation (baseline, full file, two ablations) with a decision. Idempotent."""

from __future__ import annotations

import io
from datetime import date, timedelta

import numpy as np
from django.utils import timezone

from qualification.contextfiles import selectors, services
from qualification.contextfiles.models import DecisionRecord, Evaluation

REPOSITORY = "acme/shop"
PATH = "AGENTS.md"

_V1 = """# AGENTS.md

Guidance for coding agents working in the shop monorepo. It has 3 services and 9 rules.

## Build and test
- Install dependencies with `pnpm install`.
- Run `make test` before every commit; it runs the unit and contract tests.
- Type-check with `make typecheck`.

## Architecture
- `services/api/` holds the HTTP handlers; business logic lives in `services/core/`.
- `services/worker/` runs background jobs from the `jobs` queue.
- Shared types are generated into `packages/types/` from `schema/openapi.yaml`.

## Rules
- Never edit files in `packages/types/` by hand; run `make gen` instead.
- Do not call the payments sandbox from tests; use the fakes in `services/core/testing/`.
- Always add a migration when a model changes.
- Do not commit `.env` files.

## Style
- Line length is 100 characters.
- Prefer named exports in TypeScript.
"""

_V2 = _V1.replace(
    "- Always add a migration when a model changes.\n",
    "- Always add a migration when a model changes, and run `make migrate-check`.\n"
    "- Never run `make seed` against a shared database; it truncates tables.\n",
).replace(
    "- Type-check with `make typecheck`.\n",
    "- Type-check with `make typecheck`.\n- Use npm to add a dependency to a single package.\n",
)

_V3 = (
    _V2.replace(
        "- Prefer named exports in TypeScript.\n",
        "- Prefer named exports in TypeScript.\n- Max line length: 120 for generated fixtures.\n",
    )
    .replace(
        "- `services/worker/` runs background jobs from the `jobs` queue.\n",
        "- `services/worker/` runs background jobs from the `jobs` queue; the scheduler is in "
        "`services/scheduler/`.\n",
    )
    .replace(
        "## Style\n",
        "## API reference\n<!-- generated from=schema/openapi.yaml fingerprint=3f9a2c1 -->\n"
        "- 42 endpoints, grouped by service, are listed in `docs/api/index.md`.\n"
        "<!-- end generated -->\n\n## Style\n",
    )
)

REVISIONS = [("4e1d2a0", _V1), ("8b7c913", _V2), ("c51f0e2", _V3)]

LISTING = "\n".join(
    f"100644 blob {digest}\t{path}"
    for path, digest in [
        ("Makefile", "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"),
        ("package.json", "1b2c3d4e5f60718293a4b5c6d7e8f90123456789"),
        ("pnpm-lock.yaml", "2c3d4e5f60718293a4b5c6d7e8f9012345678901"),
        ("schema/openapi.yaml", "9d8c7b6a5f4e3d2c1b0a99887766554433221100"),
        ("services/api/handlers.ts", "3d4e5f60718293a4b5c6d7e8f901234567890123"),
        ("services/core/orders.ts", "4e5f60718293a4b5c6d7e8f90123456789012345"),
        ("services/core/testing/fakes.ts", "5f60718293a4b5c6d7e8f9012345678901234567"),
        ("services/worker/main.ts", "60718293a4b5c6d7e8f901234567890123456789"),
        ("services/billing/main.ts", "718293a4b5c6d7e8f90123456789012345678901"),
        ("packages/types/index.ts", "8293a4b5c6d7e8f9012345678901234567890123"),
        ("docs/api/index.md", "93a4b5c6d7e8f901234567890123456789012345"),
    ]
)

LEDGER = {
    "pnpm install": ("platform", "One lockfile for the monorepo.", "broken installs from mixed lockfiles"),
    "make test": ("platform", "Agents skipped the contract tests twice in May.", "merged PRs that break the API contract"),
    "by hand; run": ("api-team", "Hand edits to generated types were overwritten (incident GEN-3).", "lost changes in generated code"),
    "payments sandbox": ("payments", "A test run created 300 sandbox charges.", "payments sandbox rate limits and noise"),
    ".env": ("security", "Secrets leaked in a PR in 2025.", "secret exposure"),
    "make seed": ("platform", "", ""),
}  # fmt: skip

EVALUATION_NAME = "AGENTS.md r3 vs no file — shop-tasks v3"


def seed(*, workspace, users, stdout) -> None:
    editor, reviewer = users["editor"], users["reviewer"]
    result = None
    for label, text in REVISIONS:
        result = services.context_file_import(
            workspace=workspace, repository=REPOSITORY, path=PATH, revision=label, text=text,
            actor=editor,
        )  # fmt: skip
    context_file, revision = result.context_file, result.revision
    listing = services.listing_upload(
        workspace=workspace, repository=REPOSITORY, label="c51f0e2", data=LISTING.encode(),
        actor=editor,
    )  # fmt: skip
    _ledger(revision, editor)
    if not context_file.verifications.exists():
        services.command_verification_record(
            context_file=context_file, command="make test", passed=True, exit_code=0,
            repository_revision="c51f0e2", actor=editor,
        )  # fmt: skip
        services.command_verification_record(
            context_file=context_file, command="make typecheck", passed=False, exit_code=2,
            repository_revision="c51f0e2", output="error TS2307: Cannot find module '@shop/legacy'",
            actor=editor,
        )  # fmt: skip
    check = selectors.latest_drift_check(revision=revision)
    if check is None or check.listing_id != listing.pk:
        services.drift_check_start(revision=revision, listing=listing, actor=editor)
    _evaluation(context_file, revision, editor, reviewer)
    stdout.write(f"  {context_file}: {revision.number} revisions, ledger, drift, evaluation")


def _ledger(revision, editor) -> None:
    today = timezone.localdate()
    for instruction in revision.instructions.order_by("position"):
        if instruction.owner:
            continue
        for needle, (owner, reason, affects) in LEDGER.items():
            if needle in instruction.text:
                changes = {"owner": owner, "reason": reason, "affects": affects}
                if needle == "make test":
                    changes |= {"last_reviewed_on": today - timedelta(days=400),
                                "review_trigger": "the Makefile or CI pipeline changes"}  # fmt: skip
                elif needle == "by hand; run":
                    changes |= {"last_reviewed_on": today - timedelta(days=30),
                                "review_due_on": today + timedelta(days=150),
                                "review_trigger": "the code generator changes",
                                "deletion_condition": "generated types are no longer checked in"}  # fmt: skip
                elif needle == ".env":
                    changes |= {"review_due_on": date(today.year, 1, 15) if today.month > 1
                                else today - timedelta(days=10)}  # fmt: skip
                services.instruction_update_ledger(instruction=instruction, actor=editor, **changes)
                break


def _trials_csv(tasks: int = 60, repeats: int = 2, seed: int = 10) -> str:
    """Deterministic paired outcomes: each arm's success depends on the baseline's."""
    rng = np.random.default_rng(seed)
    arms = {
        "full": (0.92, 0.30, 212, 0.86),
        "only-build-test": (0.96, 0.45, 48, 0.91),
        "only-failure-prevention": (0.95, 0.15, 81, 0.88),
    }
    lines = [
        "task_id,arm,repeat,success,adherence,input_tokens,output_tokens,model_calls,tool_calls"
    ]
    for task in range(1, tasks + 1):
        difficulty = rng.uniform(0.45, 0.92)
        for repeat in range(1, repeats + 1):
            base_ok = rng.random() < difficulty
            calls = int(rng.poisson(14)) + 3
            lines.append(
                f"shop-{task:03d},baseline,{repeat},{str(base_ok).lower()},,"
                f"{calls * 21000},{int(rng.normal(6000, 900))},{calls},{int(calls * 1.4)}"
            )
            for arm, (keep, gain, file_tokens, adherence) in arms.items():
                ok = rng.random() < (keep if base_ok else gain)
                arm_calls = calls + int(rng.integers(0, 3))
                followed = str(bool(rng.random() < adherence)).lower()
                lines.append(
                    f"shop-{task:03d},{arm},{repeat},{str(ok).lower()},{followed},"
                    f"{arm_calls * (21000 + 8 * file_tokens)},{int(rng.normal(6300, 900))},"
                    f"{arm_calls},{int(arm_calls * 1.45)}"
                )
    return "\n".join(lines) + "\n"


def _evaluation(context_file, revision, editor, reviewer) -> None:
    evaluation = context_file.evaluations.filter(name=EVALUATION_NAME).first()
    if evaluation is None:
        evaluation = services.evaluation_register(
            context_file=context_file,
            actor=editor,
            data={
                "name": EVALUATION_NAME,
                "revision": revision,
                "model_name": "claude-sonnet",
                "model_version": "4.5-20250929",
                "harness_version": "claude-code 2.0.14",
                "decoding": {"temperature": 0, "max_output_tokens": 32000},
                "task_set_version": "shop-tasks v3 (60 tasks: ordinary work, local constraints, "
                "rule-sensitive changes)",
                "expected_tasks": 60,
                "delta": 0.05,
                "margin": None,
                "notes": "Two repeats per task; same repository state per task in every arm.",
                "ablations": [
                    {"name": "only-build-test", "categories": ["build_test"]},
                    {"name": "only-failure-prevention", "categories": ["failure_prevention"]},
                ],
            },
        )
    if not evaluation.trials.exists():
        services.trials_record(
            evaluation=evaluation, data=io.StringIO(_trials_csv()).getvalue(),
            content_type="text/csv", actor=editor,
        )  # fmt: skip
    evaluation = Evaluation.objects.get(pk=evaluation.pk)
    if not evaluation.decisions.exists():
        services.decision_record(
            evaluation=evaluation,
            action=DecisionRecord.Action.REVISE,
            kept="Build and test commands; failure-prevention rules (generated types, payments "
            "sandbox, shared database, secrets).",
            removed="The architecture overview (agents find it by search) and the style rules.",
            rationale="The full file's gain does not clear the pre-registered threshold δ "
            "(inconclusive), and it costs about 15% more tokens per run. The build/test-only arm helps at a quarter of "
            "the permanent tokens. Failure-prevention rules alone are equivalent to no file on "
            "this task set, but they stay for the incidents they name, which these tasks rarely "
            "reach. The architecture overview prevents no recorded failure. Re-run the revised "
            "file with about 150 tasks.",
            actor=reviewer,
        )
