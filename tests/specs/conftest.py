"""Helpers for the specs tests: specs with versions in any state, built through the services."""

import pytest

from specs import services
from specs.analysis.content import Alternative, Item
from specs.formats.restart import Discrepancy, Indicator, Instruction, Repository

QUESTION = Item(
    "storage",
    "open_question",
    "Where does raw tool output live?",
    status="unresolved",
    alternatives=(
        Alternative("S3-compatible object store", "Cheapest at 10 TB (cost model, issue 12)."),
        Alternative("PostgreSQL large objects", "One backup path; measured 40 MB/s."),
    ),
)
BASE_ITEMS = [
    Item("api-compat", "requirement", "The public API stays backward compatible.",
         rationale="Clients pin v1 for a year."),
    Item("retention", "constraint", "Raw uploads are kept for 30 days."),
    QUESTION,
]  # fmt: skip


def resolved(items):
    """The base items with the storage question settled as a decision."""
    return [
        *items[:2],
        Item("storage", "decision", "Raw tool output lives in the S3-compatible store.",
             rationale="Cheapest at 10 TB; see the cost model."),
    ]  # fmt: skip


@pytest.fixture
def make_spec(workspace, members):
    def make(consequence="high", slug="payments", title="Payments API"):
        return services.spec_create(
            workspace=workspace,
            title=title,
            slug=slug,
            consequence=consequence,
            actor=members["editor"],
        )

    return make


@pytest.fixture
def authoritative(make_spec, members):
    """A high-consequence spec whose v1 (with one open question) is authoritative."""

    def make(consequence="high", **kwargs):
        spec = make_spec(consequence, **kwargs)
        v1 = services.spec_version_create(
            spec=spec, author=members["editor"], supersedes=None, items=BASE_ITEMS, note="first"
        )
        services.spec_version_submit(version=v1, actor=members["editor"])
        if consequence == "high":
            services.spec_version_approve(
                version=v1, reviewer=members["reviewer"], acknowledged_resolutions=[]
            )
        v1.refresh_from_db()
        return spec, v1

    return make


@pytest.fixture
def make_package(members):
    def make(version, **overrides):
        arguments = dict(
            workspace=version.workspace,
            actor=members["editor"],
            spec_version=version,
            repository=Repository(
                commit="0123abcd" * 5, remote="git@example.org:team/pay.git", branch="fix/retry"
            ),
            instruction=Instruction(
                next_action="Make test_refund_idempotent pass without changing the API.",
                authoritative_sources=("Spec payments v1", "The repository at 0123abcd"),
            ),
            completed_changes=["Added idempotency keys to POST /refunds"],
            changed_files=["payments/api.py", "tests/test_refunds.py"],
            current_failures=["tests/test_refunds.py::test_refund_idempotent: 409 != 200"],
            verifications=[
                services.VerificationInput(
                    command="pytest -q tests/test_refunds.py",
                    exit_status=1,
                    commit="0123abcd" * 5,
                    output="collected 12 items\n"
                    + "".join(f"line {i}\n" for i in range(40))
                    + "FAILED tests/test_refunds.py::test_refund_idempotent\n",
                )
            ],
            discrepancies=[
                Discrepancy(
                    claim="The summary says refunds.py was already migrated.",
                    source="compaction summary at call 212",
                    repository_state="refunds.py still calls the v1 client (line 88).",
                )
            ],
            indicators=[Indicator("superseded-assumption"), Indicator("other", "Loops on lint")],
            title="Restart refunds work",
        )
        arguments.update(overrides)
        return services.restart_package_create(**arguments)

    return make
