"""Demo run c: an edit based on stale evidence. Pure: no Django."""

from __future__ import annotations

from traces.annotations.demo_runs.transcript import DemoRun, _numbered, _start

TAX_BEFORE = '''from decimal import ROUND_HALF_UP, Decimal

RATES = {"DE": Decimal("0.19"), "FR": Decimal("0.20"), "NL": Decimal("0.21")}


def compute_tax(amount: Decimal, region: str) -> Decimal:
    """Tax on `amount` for `region`, rounded to the cent."""
    rate = RATES[region]
    return (amount * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)'''

TAX_AFTER = '''from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from billing.tax_rates import rate_for


def tax_for(line_amount: Decimal, *, region: str, on: date) -> Decimal:
    """Tax on one invoice line for `region` at the rate in force `on` that day."""
    rate = rate_for(region, on)
    return (line_amount * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)'''

INVOICE_LINES = """from dataclasses import dataclass
from decimal import Decimal

from billing.money import Money


@dataclass
class InvoiceLine:
    invoice: "Invoice"
    description: str
    amount: Decimal

    @property
    def total(self) -> Money:
        return Money(self.amount, self.invoice.currency)"""


def stale_evidence() -> DemoRun:
    title = "Apply the regional tax to invoice lines (#212)"
    w = _start(
        "c2e94b17-58a0-4d6f-b3c8-91e7a2f05d48", "/home/dev/billing-api",
        "2026-10-29T10:40:00", title,
    )  # fmt: skip
    w.user(
        "Invoice lines need the regional tax applied to their total (issue #212). The tax "
        "helper is in src/billing/tax.py."
    )
    w.step(
        "I'll read the tax helper and the invoice line first.",
        tool="Read",
        args={"file_path": "/home/dev/billing-api/src/billing/tax.py"},
        result=_numbered(TAX_BEFORE),
        evidence=True,
    )
    w.step(
        tool="Read",
        args={"file_path": "/home/dev/billing-api/src/billing/invoice_lines.py"},
        result=_numbered(INVOICE_LINES),
    )
    w.step(
        "Before editing I'll rebase on main, so the change goes on the current base.",
        tool="Bash",
        args={
            "command": "git pull --rebase origin main && git log --oneline -2",
            "description": "Rebase on main",
        },
        result="From github.com:acme/billing-api\n * branch            main       -> FETCH_HEAD\n"
        "Updating 4c1e2a0..9b7f3d1\nFast-forward\n src/billing/tax.py       | 38 ++++++++++--------\n"
        " src/billing/tax_rates.py | 24 +++++++++++\n tests/test_tax.py        | 12 +++---\n"
        " 3 files changed, 47 insertions(+), 27 deletions(-)\n create mode 100644 src/billing/tax_rates.py\n"
        "Successfully rebased and updated refs/heads/feature/regional-tax.\n"
        "9b7f3d1 tax: compute_tax(amount, region) becomes tax_for(line_amount, region=, on=); "
        "rates move to tax_rates.py (#209)\n4c1e2a0 invoices: currency on Invoice",
        evidence=True,
    )
    w.step(
        "Rebased. Now the line total: add compute_tax(amount, region) from billing.tax, as read "
        "above.",
        tool="Edit",
        args={
            "file_path": "/home/dev/billing-api/src/billing/invoice_lines.py",
            "old_string": "from billing.money import Money\n",
            "new_string": "from billing.money import Money\nfrom billing.tax import compute_tax\n",
        },
        result="The file /home/dev/billing-api/src/billing/invoice_lines.py has been updated.",
        diverges=True,
    )
    w.step(
        tool="Edit",
        args={
            "file_path": "/home/dev/billing-api/src/billing/invoice_lines.py",
            "old_string": "        return Money(self.amount, self.invoice.currency)",
            "new_string": "        tax = compute_tax(self.amount, self.invoice.region)\n"
            "        return Money(self.amount + tax, self.invoice.currency)",
        },
        result="The file /home/dev/billing-api/src/billing/invoice_lines.py has been updated.",
    )
    w.step(
        tool="Bash",
        args={
            "command": "pytest tests/test_invoice_lines.py -q",
            "description": "Run the invoice line tests",
        },
        result="==================================== ERRORS ====================================\n"
        "_______________ ERROR collecting tests/test_invoice_lines.py ________________\n"
        "ImportError while importing test module '/home/dev/billing-api/tests/test_invoice_lines.py'.\n"
        "tests/test_invoice_lines.py:5: in <module>\n    from billing.invoice_lines import InvoiceLine\n"
        "src/billing/invoice_lines.py:5: in <module>\n    from billing.tax import compute_tax\n"
        "E   ImportError: cannot import name 'compute_tax' from 'billing.tax' "
        "(/home/dev/billing-api/src/billing/tax.py)\n1 error in 0.38s",
        error=True,
    )
    w.step(
        "compute_tax seems to have lost its definition; I'll put it back in tax.py.",
        tool="Edit",
        args={
            "file_path": "/home/dev/billing-api/src/billing/tax.py",
            "old_string": "def compute_tax(amount: Decimal, region: str) -> Decimal:",
            "new_string": "def compute_tax(amount: Decimal, region: str) -> Decimal:  # noqa",
        },
        result="<tool_use_error>String to replace not found in file.\n"
        "String: def compute_tax(amount: Decimal, region: str) -> Decimal:</tool_use_error>",
        error=True,
    )
    w.step(
        "tax.py changed since I read it: the rebase renamed the helper. Reading it again.",
        tool="Read",
        args={"file_path": "/home/dev/billing-api/src/billing/tax.py"},
        result=_numbered(TAX_AFTER),
    )
    w.step(
        tool="Edit",
        args={
            "file_path": "/home/dev/billing-api/src/billing/invoice_lines.py",
            "old_string": "from billing.tax import compute_tax\n",
            "new_string": "from billing.tax import tax_for\n",
        },
        result="The file /home/dev/billing-api/src/billing/invoice_lines.py has been updated.",
    )
    w.step(
        tool="Edit",
        args={
            "file_path": "/home/dev/billing-api/src/billing/invoice_lines.py",
            "old_string": "        tax = compute_tax(self.amount, self.invoice.region)",
            "new_string": "        tax = tax_for(self.amount, region=self.invoice.region, on=self.invoice.issued)",
        },
        result="The file /home/dev/billing-api/src/billing/invoice_lines.py has been updated.",
    )
    w.step(
        tool="Bash",
        args={
            "command": "pytest tests/test_invoice_lines.py tests/test_tax.py -q",
            "description": "Run the tests",
        },
        result="..........                                                               [100%]\n"
        "10 passed in 0.47s",
    )
    w.step("Invoice line totals now include tax_for(...) at the rate in force on the issue date.")
    return w.done("stale_or_conflicting_evidence", title)
