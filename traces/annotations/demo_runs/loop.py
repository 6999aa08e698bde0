"""Demo run b: a repetition loop. Pure: no Django."""

from __future__ import annotations

from traces.annotations.demo_runs.transcript import DemoRun, _numbered, _start

DUE_TEST = "pytest tests/test_invoices.py::test_due_date_end_of_month -q"

DUE_FAILURE = """F                                                                        [100%]
=================================== FAILURES ===================================
__________________________ test_due_date_end_of_month __________________________

    def test_due_date_end_of_month():
        invoice = make_invoice(issued=date(2026, 1, 31), terms_days=30)
>       assert invoice.due_date == date(2026, 3, 2)
E       AssertionError: assert datetime.date(2026, 3, 3) == datetime.date(2026, 3, 2)
E        +  where datetime.date(2026, 3, 3) = <Invoice INV-0042>.due_date

tests/test_invoices.py:88: AssertionError
=========================== short test summary info ============================
FAILED tests/test_invoices.py::test_due_date_end_of_month - AssertionError: assert datetime.date(2026, 3, 3) == datetime.date(2026, 3, 2)
1 failed in 0.41s"""

INVOICES = """from dataclasses import dataclass
from datetime import date, timedelta


@dataclass
class Invoice:
    number: str
    issued: date
    terms_days: int = 30

    @property
    def due_date(self) -> date:
        return self.issued + timedelta(days=self.terms_days) + self._grace()

    def _grace(self) -> timedelta:
        # Month-end invoices get a grace day (billing policy, Oct 2026).
        next_day = self.issued + timedelta(days=1)
        return timedelta(days=1) if next_day.month != self.issued.month else timedelta(0)"""


def repetition() -> DemoRun:
    title = "Fix the failing invoice due-date test"
    w = _start(
        "a83d07e4-1b59-4f2c-8e3a-6c0d9f5b2e71", "/home/dev/billing-api",
        "2026-10-28T14:03:00", title,
    )  # fmt: skip
    w.user("test_due_date_end_of_month has been failing on CI since this morning. Please fix it.")
    w.step(
        "Let me reproduce it first.",
        tool="Bash",
        args={"command": DUE_TEST, "description": "Run the failing test"},
        result=DUE_FAILURE,
        error=True,
        evidence=True,
    )
    w.step(
        tool="Read",
        args={"file_path": "/home/dev/billing-api/src/billing/invoices.py"},
        result=_numbered(INVOICES),
    )
    w.step(
        "The arithmetic in due_date looks right to me, and this passed yesterday. It may be "
        "flaky; running it again.",
        tool="Bash",
        args={"command": DUE_TEST, "description": "Run the failing test"},
        result=DUE_FAILURE.replace("0.41s", "0.39s"),
        error=True,
        diverges=True,
    )
    w.step(
        "Still failing. Once more, to be sure it is not the test database.",
        tool="Bash",
        args={"command": DUE_TEST, "description": "Run the failing test"},
        result=DUE_FAILURE.replace("0.41s", "0.40s"),
        error=True,
    )
    w.step(
        "Let me run it again.",
        tool="Bash",
        args={"command": DUE_TEST, "description": "Run the failing test"},
        result=DUE_FAILURE,
        error=True,
    )
    w.step(
        "Running it one more time.",
        tool="Bash",
        args={"command": DUE_TEST, "description": "Run the failing test"},
        result=DUE_FAILURE.replace("0.41s", "0.42s"),
        error=True,
    )
    w.user(
        "You've run the same test five times and got the same assertion every time: it is not "
        "flaky. Stop re-running it. 3 March instead of 2 March is one extra day — look at what "
        "adds a day."
    )
    w.step(
        "You're right. The extra day is _grace(): 31 January is a month end, so it adds one. "
        "The test expects no grace day; the policy comment says month-end invoices get one, so "
        "I'll check the history before changing either.",
        tool="Bash",
        args={
            "command": "git log -3 --format='%h %s' -- src/billing/invoices.py",
            "description": "History of invoices.py",
        },
        result='c41a9e2 Revert "billing: grace day for month-end invoices" (policy withdrawn)\n'
        "77b0d15 billing: grace day for month-end invoices\n2f9e6c3 billing: invoice terms",
    )
    w.step(
        "The grace day was reverted upstream but the revert never reached this branch's "
        "invoices.py. Removing it.",
        tool="Edit",
        args={
            "file_path": "/home/dev/billing-api/src/billing/invoices.py",
            "old_string": "        return self.issued + timedelta(days=self.terms_days) + self._grace()",
            "new_string": "        return self.issued + timedelta(days=self.terms_days)",
        },
        result="The file /home/dev/billing-api/src/billing/invoices.py has been updated.",
    )
    w.step(
        tool="Bash",
        args={
            "command": "pytest tests/test_invoices.py -q",
            "description": "Run the invoice tests",
        },
        result="............                                                             [100%]\n"
        "12 passed in 0.52s",
    )
    w.step(
        "Fixed: due_date no longer adds the withdrawn month-end grace day; 12 invoice tests pass."
    )
    return w.done("repetition", title)
