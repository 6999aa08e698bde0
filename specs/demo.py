"""seed_demo's specifications: a high-consequence spec with three approved versions and two
restart packages (one pinning a superseded version), a spec with a version waiting for review
that resolves an open question, and a low-consequence spec. Idempotent: existing slugs are kept.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from specs import services
from specs.analysis.content import Alternative, Item
from specs.formats.restart import Discrepancy, Indicator, Instruction, Repository
from specs.models import Spec, SpecVersion
from traces.models import Session

HEAD = "4f2c9a1e7b3d5c8f0a6e2b9d1c4f7a3e5b8d0c2f"
OLDER = "9b1e3d5f7a2c4e6b8d0f1a3c5e7b9d2f4a6c8e0b"

REFUNDS_V1 = [
    Item("backward-compat", "requirement",
         "POST /v1/refunds keeps accepting and answering the v1 payload until every client has "
         "moved; v2 lives beside it at /v2/refunds.",
         rationale="Three merchants pin the v1 SDK until their Q3 release. Breaking them is why the "
         "first migration attempt was rolled back."),
    Item("idempotency", "requirement",
         "Every refund request carries an Idempotency-Key; a repeat with the same key returns the "
         "original result and creates nothing."),
    Item("migration-order", "constraint",
         "Migrate in this order: nullable columns, dual write, backfill, read switch, drop old "
         "columns. Each step ships on its own."),
    Item("refund-settled", "definition",
         "A refund is settled when the processor confirms it, not when we send it."),
    Item("key-scope", "open_question", "Is the idempotency key scoped per merchant or globally?",
         status="unresolved",
         alternatives=(
             Alternative("Per merchant: unique (merchant_id, key)",
                         "The processor scopes keys per merchant; two merchants reused "
                         "'retry-1' in the March traces."),
             Alternative("Global: unique (key)",
                         "Simpler index; no collisions in 90 days of production logs."),
         )),
    Item("backfill-window", "open_question", "May the backfill run during business hours?",
         status="unresolved",
         alternatives=(
             Alternative("Yes, throttled to 200 rows/s",
                         "Load test: p99 latency +4 ms at 200 rows/s on the refunds table."),
             Alternative("No, only in the nightly window",
                         "Ops policy 7.2 forbids bulk writes 08:00-20:00 UTC."),
         )),
]  # fmt: skip


def _v2(items):
    by_key = {item.key: item for item in items}
    return [
        by_key["backward-compat"],
        Item("idempotency", "requirement",
             "Every refund request carries an Idempotency-Key; a repeat with the same key returns "
             "the original response with status 200 and creates nothing."),
        by_key["migration-order"],
        by_key["refund-settled"],
        Item("refund-v2-endpoint", "interface",
             "POST /v2/refunds {amount, currency, reason, idempotency_key} -> 201 {refund_id, "
             "status}; 200 with the original body on a repeated key."),
        Item("key-scope", "decision",
             "Idempotency keys are scoped per merchant: unique (merchant_id, key).",
             rationale="The processor scopes keys per merchant, and merchants reuse simple keys; a "
             "global scope would return one merchant's refund to another."),
        by_key["backfill-window"],
    ]  # fmt: skip


def _v3(items):
    by_key = {item.key: item for item in items}
    return [
        by_key["backward-compat"],
        by_key["idempotency"],
        Item("no-float-amounts", "constraint",
             "Amounts are integers in minor units; no floating point anywhere in the refund path.",
             rationale="A float rounding bug produced 0.01 discrepancies in the v1 reconciliation "
             "report."),
        Item("migration-order", "constraint",
             "Migrate in this order: nullable columns, dual write, backfill, read switch behind a "
             "per-merchant flag, drop old columns. Each step ships on its own."),
        by_key["refund-settled"],
        by_key["refund-v2-endpoint"],
        by_key["key-scope"],
        by_key["backfill-window"],
    ]  # fmt: skip


RETENTION_V1 = [
    Item("raw-uploads", "requirement",
         "Raw trace uploads are kept unchanged, with their sha256, as evidence for every number "
         "derived from them."),
    Item("redaction", "constraint", "Secrets are redacted before an artifact is readable by anyone."),
    Item("retention-period", "open_question", "How long are raw uploads kept?", status="unresolved",
         alternatives=(
             Alternative("30 days", "Storage cost model: 1.2 TB/month at current ingest."),
             Alternative("1 year", "Audit asks to reproduce a quarterly report from its inputs."),
         )),
]  # fmt: skip
RETENTION_V2 = [
    *RETENTION_V1[:2],
    Item("retention-period", "decision",
         "Raw uploads are kept for 1 year, then deleted with their derived artifacts.",
         rationale="The quarterly audit must be reproducible from its inputs; cost is acceptable "
         "at 14 TB/year with lifecycle rules."),
]  # fmt: skip

CONVENTIONS_V1 = [
    Item("test-command", "requirement", "Run `make test` before every commit; it uses PostgreSQL."),
    Item("no-generated-edits", "constraint",
         "Never edit files under generated/; regenerate them with `make codegen`.",
         rationale="Hand edits were overwritten twice and cost a day of debugging each time."),
]  # fmt: skip

PYTEST_OUTPUT = "\n".join(
    [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.4, pluggy-1.5.0",
        "collected 214 items",
        "",
        *[f"tests/refunds/test_api.py::test_case_{i:03d} PASSED" for i in range(40)],
        "tests/refunds/test_api.py::test_refund_idempotent FAILED",
        "tests/refunds/test_backfill.py::test_backfill_throttle PASSED",
        "",
        "=================================== FAILURES ===================================",
        "___________________________ test_refund_idempotent ____________________________",
        "    def test_refund_idempotent(client, merchant):",
        "        first = client.post('/v2/refunds', payload, headers={'Idempotency-Key': 'k1'})",
        "        again = client.post('/v2/refunds', payload, headers={'Idempotency-Key': 'k1'})",
        ">       assert again.status_code == 200",
        "E       assert 409 == 200",
        "tests/refunds/test_api.py:88: AssertionError",
        "=========================== short test summary info ============================",
        "FAILED tests/refunds/test_api.py::test_refund_idempotent - assert 409 == 200",
        "======================== 1 failed, 213 passed in 41.07s ========================",
        "",
    ]
)


def _approve(version, *, editor, reviewer, acknowledged=()):
    services.spec_version_submit(version=version, actor=editor)
    return services.spec_version_approve(
        version=version, reviewer=reviewer, acknowledged_resolutions=list(acknowledged)
    )


def _backdate(version: SpecVersion, days_ago: float, *, superseded_days_ago: float | None = None):
    now = timezone.now()
    created = now - timedelta(days=days_ago)
    fields = {"created_at": created}
    if version.submitted_at:
        fields["submitted_at"] = created + timedelta(hours=3)
    if version.decided_at:
        fields["decided_at"] = created + timedelta(hours=20)
    if superseded_days_ago is not None:
        fields["superseded_at"] = now - timedelta(days=superseded_days_ago) + timedelta(hours=20)
    SpecVersion.objects.filter(pk=version.pk).update(**fields)


def _package(workspace, *, actor, version, session, title, next_action, indicators):
    return services.restart_package_create(
        workspace=workspace,
        actor=actor,
        title=title,
        spec_version=version,
        trace_session=session,
        repository=Repository(
            commit=HEAD, remote="git@github.example.org:payments/refunds.git", branch="refunds-v2"
        ),
        completed_changes=[
            "Added nullable v2 columns to refunds (migration 0042)",
            "Dual write from /v1/refunds into the v2 columns",
            "POST /v2/refunds behind the refunds_v2 flag",
        ],
        changed_files=[
            "refunds/migrations/0042_v2_columns.py",
            "refunds/api.py",
            "refunds/services.py",
            "tests/refunds/test_api.py",
        ],
        current_failures=[
            "tests/refunds/test_api.py::test_refund_idempotent: a repeated key answers 409 "
            "instead of 200 with the original body"
        ],
        verifications=[
            services.VerificationInput(
                command="pytest -q tests/refunds", exit_status=1, commit=HEAD, output=PYTEST_OUTPUT
            ),
            services.VerificationInput(
                command="ruff check refunds",
                exit_status=0,
                commit=OLDER,
                output="All checks passed!\n",
            ),
        ],
        discrepancies=[
            Discrepancy(
                claim="The backfill is done for all merchants.",
                source="compaction summary before call 212",
                repository_state="refunds/backfill.py has processed merchants 1-40 of 112 "
                "(backfill_progress table); the read switch must wait.",
            )
        ],
        instruction=Instruction(
            next_action=next_action,
            authoritative_sources=(
                f"Specification '{version.spec.title}' v{version.number} "
                f"(sha256:{version.fingerprint[:12]})",
                "The repository at the handoff commit",
                "The failing test output above, not any summary of it",
            ),
        ),
        indicators=indicators,
    )


def seed(*, workspace, users, stdout):
    editor, reviewer, admin = users["editor"], users["reviewer"], users["admin"]
    session = Session.objects.for_workspace(workspace).order_by("-started_at", "-id").first()
    created = 0

    if not Spec.objects.filter(workspace=workspace, slug="refund-api-migration").exists():
        with transaction.atomic():
            spec = services.spec_create(
                workspace=workspace,
                title="Refund API v2 migration",
                slug="refund-api-migration",
                consequence="high",
                summary="What the refunds service must keep, change and decide while v2 replaces "
                "v1 without breaking pinned clients.",
                owner=editor,
                actor=editor,
            )
            sources = [
                services.SourceInput(
                    "reference",
                    url="https://tracker.example.org/PAY-412",
                    label="PAY-412: refunds v2",
                )
            ]
            if session is not None:
                sources.append(services.SourceInput("trace_session", trace_session=session))
            v1 = services.spec_version_create(
                spec=spec, author=editor, supersedes=None, items=REFUNDS_V1,
                note="First consolidation of the PAY-412 discussion and the March traces.",
                sources=sources,
            )  # fmt: skip
            _approve(v1, editor=editor, reviewer=reviewer)
            v2 = services.spec_version_create(
                spec=spec, author=editor, supersedes=v1, items=_v2(REFUNDS_V1),
                note="Settles the key scope (per merchant) and adds the v2 endpoint contract.",
            )  # fmt: skip
            _approve(v2, editor=editor, reviewer=reviewer, acknowledged=["key-scope"])
            stale = _package(
                workspace,
                actor=editor,
                version=v2,
                session=session,
                title="Restart refunds v2 after the idempotency loop",
                next_action="Make test_refund_idempotent pass: a repeated key returns the original "
                "response with 200. Do not touch the v1 endpoint.",
                indicators=[
                    Indicator("reproposed-rejected-interface", "Proposed a global key index again"),
                    Indicator("conflicting-summaries"),
                ],
            )
            v3 = services.spec_version_create(
                spec=spec, author=editor, supersedes=v2, items=_v3(_v2(REFUNDS_V1)),
                note="Adds the integer-amount constraint and the per-merchant read-switch flag.",
            )  # fmt: skip
            _approve(v3, editor=editor, reviewer=admin)
            _package(
                workspace,
                actor=editor,
                version=v3,
                session=session,
                title="Restart refunds v2 from v3",
                next_action="Make test_refund_idempotent pass, then continue the backfill from "
                "merchant 41; the backfill-window question is still open: ask before running "
                "it in business hours.",
                indicators=[
                    Indicator("superseded-assumption"),
                    Indicator("obsolete-plan-edits", "Kept editing the v1 serializer"),
                ],
            )
            for version, days, superseded in ((v1, 21, 9), (v2, 9, 2), (v3, 2, None)):
                version.refresh_from_db()
                _backdate(version, days, superseded_days_ago=superseded)
            created += 1
            stdout.write(
                f"  spec {spec.slug}: v1→v2→v3, packages #{stale.pk} (superseded) and one current"
            )

    if not Spec.objects.filter(workspace=workspace, slug="artifact-retention").exists():
        with transaction.atomic():
            spec = services.spec_create(
                workspace=workspace,
                title="Artifact retention",
                slug="artifact-retention",
                consequence="high",
                summary="How long raw evidence is kept, and how it is protected.",
                owner=admin,
                actor=admin,
            )
            v1 = services.spec_version_create(
                spec=spec, author=admin, supersedes=None, items=RETENTION_V1,
                note="Initial policy; the period is still open.",
            )  # fmt: skip
            _approve(v1, editor=admin, reviewer=reviewer)
            v2 = services.spec_version_create(
                spec=spec, author=editor, supersedes=v1, items=RETENTION_V2,
                note="Settles the retention period at one year (audit requirement).",
            )  # fmt: skip
            services.spec_version_submit(version=v2, actor=editor)
            v1.refresh_from_db()
            _backdate(v1, 12)
            created += 1
            stdout.write(f"  spec {spec.slug}: v2 waits for review and resolves an open question")

    if not Spec.objects.filter(workspace=workspace, slug="repository-conventions").exists():
        with transaction.atomic():
            spec = services.spec_create(
                workspace=workspace,
                title="Agent repository conventions",
                slug="repository-conventions",
                consequence="low",
                summary="Build and safety rules every coding agent in this repository follows.",
                actor=editor,
            )
            v1 = services.spec_version_create(
                spec=spec, author=editor, supersedes=None, items=CONVENTIONS_V1
            )
            services.spec_version_submit(version=v1, actor=editor)
            created += 1
            stdout.write(f"  spec {spec.slug}: low consequence, authoritative on submit")
    if not created:
        stdout.write("  specifications already present")
