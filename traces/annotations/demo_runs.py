"""Demo runs that go wrong: four hand-written Claude Code sessions, one per failure an annotator
must learn to spot (a constraint forgotten after a compaction, a repetition loop, an edit on
stale evidence, a harness truncation). Pure: no Django.

Each run's evidence is in its text (prompts, assistant text, tool calls and results, the
compaction summary), and its token usage grows with what the window holds. `expected_call`
(the first divergence) is for tests only: the demo never shows it, so marking stays blind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import orjson

MODEL = "claude-sonnet-4-5"
VERSION = "2.1.80"
SYSTEM_TOKENS = 15_400  # system prompt, tool schemas and CLAUDE.md: cached before the first call


def tokens_of(text: str) -> int:
    """About four characters a token, as the ingestion estimates summaries."""
    return (len(text) + 3) // 4


@dataclass
class DemoRun:
    key: str  # the failure class the run was written to show
    title: str  # the task, as the session's title (it says nothing of what goes wrong)
    session_id: str
    project: str
    lines: list[bytes]
    calls: int  # API calls (one per message id, however many lines it was streamed as)
    compactions: int
    expected_call: int  # session index of the first consequential divergence
    evidence_calls: tuple[int, ...]  # earlier steps that show why


@dataclass
class _Transcript:
    """Writes a transcript as Claude Code does: one line per content block of a streamed
    message, each repeating the message's usage, then a user line per tool result."""

    session_id: str
    project: str
    clock: datetime
    lines: list[bytes] = field(default_factory=list)
    calls: int = 0
    compactions: int = 0
    window: int = SYSTEM_TOKENS  # tokens the next call will carry, before what is pending
    cached: int = SYSTEM_TOKENS  # prefix the cache already holds
    marked: int | None = None
    evidence: list[int] = field(default_factory=list)
    counter: int = 0

    def _base(self, kind: str, seconds: float) -> dict:
        self.counter += 1
        self.clock += timedelta(seconds=seconds)
        return {
            "type": kind,
            "parentUuid": f"{self.session_id[:8]}-{self.counter - 1:06d}"
            if self.counter > 1
            else None,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.project,
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": "main",
            "uuid": f"{self.session_id[:8]}-{self.counter:06d}",
            "timestamp": self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }

    def _write(self, line: dict) -> None:
        self.lines.append(orjson.dumps(line))

    def title(self, text: str) -> None:
        self._write({"type": "custom-title", "customTitle": text, "sessionId": self.session_id})

    def user(self, text: str, *, seconds: float = 30) -> None:
        self._write({**self._base("user", seconds), "message": {"role": "user", "content": text}})
        self.window += tokens_of(text) + 8

    def step(
        self,
        text: str = "",
        *,
        tool: str | None = None,
        args: dict | None = None,
        result: str = "",
        error: bool = False,
        thinking: str = "",
        diverges: bool = False,
        evidence: bool = False,
    ) -> int:
        """One API call (thinking, text, at most one tool call) and its tool result; returns
        its session index."""
        index = self.calls
        self.calls += 1
        if diverges:
            self.marked = index
        if evidence:
            self.evidence.append(index)
        message_id = f"msg_01{self.session_id[:6]}{index:04d}"
        request_id = f"req_01{self.session_id[-6:]}{index:04d}"
        tool_id = f"toolu_01{self.session_id[:6]}{index:04d}"
        blocks = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": "EqoBCkgIBx"})
        if text:
            blocks.append({"type": "text", "text": text})
        if tool:
            blocks.append({"type": "tool_use", "id": tool_id, "name": tool, "input": args or {}})
        output = sum(tokens_of(orjson.dumps(b).decode()) for b in blocks) + 12
        context = self.window
        usage = {
            "input_tokens": 3,
            "cache_creation_input_tokens": context - 3 - min(self.cached, context - 3),
            "cache_read_input_tokens": min(self.cached, context - 3),
        }
        for number, block in enumerate(blocks):
            last = number == len(blocks) - 1
            self._write(
                {
                    **self._base("assistant", 2 if number else 6),
                    "requestId": request_id,
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": MODEL,
                        "content": [block],
                        "stop_reason": ("tool_use" if tool else "end_turn") if last else None,
                        "stop_sequence": None,
                        # Streamed lines before the last hold a partial output count.
                        "usage": {
                            **usage,
                            "output_tokens": output if last else 1 + number,
                            "service_tier": "standard",
                        },
                    },
                }
            )
        self.cached = context
        self.window = context + output
        if tool:
            content = {"type": "tool_result", "tool_use_id": tool_id, "content": result}
            if error:
                content["is_error"] = True
            self._write(
                {
                    **self._base("user", 3),
                    "message": {"role": "user", "content": [content]},
                    "toolUseResult": {"stdout": result} if tool == "Bash" else {},
                }
            )
            self.window += tokens_of(result) + 10
        return index

    def compact(self, summary: str, *, trigger: str = "manual", focus: str = "") -> None:
        """`/compact [focus]`: the boundary record, then the summary the model continues from."""
        if trigger == "manual":
            self.user(
                "<command-name>/compact</command-name>\n<command-message>compact</command-message>"
                f"\n<command-args>{focus}</command-args>"
            )
        pre = self.window
        self.compactions += 1
        self.window = SYSTEM_TOKENS + tokens_of(summary) + 8
        self._write(
            {
                **self._base("system", 40),
                "parentUuid": None,
                "logicalParentUuid": f"{self.session_id[:8]}-{self.counter - 1:06d}",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "level": "info",
                "compactMetadata": {
                    "trigger": trigger,
                    "preTokens": pre,
                    "postTokens": self.window,
                    "durationMs": 38_412,
                },
            }
        )
        self._write(
            {
                **self._base("user", 1),
                "isCompactSummary": True,
                "isVisibleInTranscriptOnly": True,
                "message": {"role": "user", "content": summary},
            }
        )
        self.cached = SYSTEM_TOKENS

    def done(self, key: str, title: str) -> DemoRun:
        assert self.marked is not None, "a demo run marks where it goes wrong"
        return DemoRun(
            key, title, self.session_id, self.project, self.lines, self.calls, self.compactions,
            self.marked, tuple(self.evidence),
        )  # fmt: skip


def _start(session_id: str, project: str, when: str, title: str) -> _Transcript:
    writer = _Transcript(session_id, project, datetime.fromisoformat(when).replace(tzinfo=UTC))
    writer.title(title)
    return writer


# --- a: a constraint forgotten after a compaction ------------------------------------

_GREP_SOURCES = {
    "src/checkout/refunds/api.py": [
        "def create_refund(request, order_id):", "    order = Order.get(order_id)",
        "    if not order.refundable:", "        raise RefundNotAllowed(order_id)",
        "    refund = RefundRequest.create(", '    log.info("refund requested", order=order_id)',
        "    return JsonResponse(refund.as_dict(), status=201)",
    ],
    "src/checkout/refunds/admin.py": [
        "class RefundRequestAdmin(Admin):", '    search_fields = ["order_id", "requested_by"]',
        "    def refund_status(self, obj):",
    ],
    "src/checkout/refunds/models.py": [
        'REFUND_REQUESTS = table("checkout.refund_requests")', "class RefundRequest:",
        "    payment_refund_id: int | None = None", "        row = REFUND_REQUESTS.insert(",
    ],
    "src/checkout/reports/reconciliation.py": [
        "Daily refund reconciliation: what checkout asked for against what payments paid out.",
        "FROM payments.refund_reconciliation AS rr",
    ],
    "src/checkout/orders/state.py": [
        '    REFUND_PENDING = "refund_pending"', '    REFUNDED = "refunded"',
        "        if self.status in (REFUND_PENDING, REFUNDED):",
    ],
    "db/checkout/migrations/0031_refund_requests.sql": [
        "CREATE TABLE checkout.refund_requests (", "  payment_refund_id bigint,",
    ],
    "db/payments/schema.sql": [
        "CREATE TABLE payments.refunds (", "  checkout_request_id bigint NOT NULL,",
        "CREATE INDEX refunds_paid_at ON payments.refunds (paid_at);",
    ],
    "tests/refunds/test_api.py": [
        "def test_refund_requires_refundable_order(client, order):",
        '    response = client.post(f"/orders/{order.id}/refunds", {})',
        "def test_refund_is_logged(client, order, caplog):",
    ],
}  # fmt: skip
# What a repository-wide `grep -n refund` returns: every file above, each line many times
# (handlers, tests and fixtures repeat them).
REFUND_GREP = "\n".join(
    f"{path}:{17 + 23 * round_ + 3 * number}:{line}"
    for round_ in range(12)
    for path, lines in _GREP_SOURCES.items()
    for number, line in enumerate(lines)
)

REFUND_MODELS = """from dataclasses import dataclass
from decimal import Decimal

from checkout.db import table

REFUND_REQUESTS = table("checkout.refund_requests")


@dataclass
class RefundRequest:
    id: int
    order_id: int
    amount: Decimal
    currency: str
    requested_by: str
    # Set once payments has issued the refund (payments.refunds.id).
    payment_refund_id: int | None = None

    @classmethod
    def create(cls, *, order_id, amount, currency, requested_by):
        row = REFUND_REQUESTS.insert(
            order_id=order_id, amount=amount, currency=currency, requested_by=requested_by
        )
        return cls(**row)"""

RECONCILIATION = '''"""Daily refund reconciliation: what checkout asked for against what payments paid out."""

from checkout.db import query

SQL = """
SELECT rr.id, rr.order_id, rr.amount, rr.currency, rr.paid_at, rr.status
FROM payments.refund_reconciliation AS rr
WHERE rr.paid_at::date = %(day)s
ORDER BY rr.paid_at
"""

COLUMNS = ["id", "order_id", "amount", "currency", "paid_at", "status"]


def rows(day):
    return query(SQL, {"day": day})'''

PAYMENTS_VIEW = """-- Owned by the payments team. Changes go through payments-schema review (#payments-db).
CREATE OR REPLACE VIEW payments.refund_reconciliation AS
SELECT r.id,
       r.checkout_request_id AS order_id,
       r.amount,
       r.currency,
       r.paid_at,
       r.status
FROM payments.refunds AS r
WHERE r.status IN ('paid', 'failed');"""

COMPACT_SUMMARY = """This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:

1. Primary request: add refund reason codes (DAMAGED, LATE, WRONG_ITEM, OTHER) to checkout refund requests; show the reason in the admin refunds list; the reason should also reach the reporting.
2. Done so far:
   - db/checkout/migrations/0032_refund_reason.sql adds checkout.refund_requests.reason (default 'OTHER').
   - src/checkout/refunds/models.py: RefundReason enum and RefundRequest.reason.
   - src/checkout/refunds/api.py accepts an optional "reason" (backwards compatible).
   - src/checkout/refunds/admin.py lists the reason. tests/refunds: 14 passed.
3. Constraints from the user:
   - Keep the refunds API backwards compatible: reason is optional and defaults to OTHER.
   - Run tests/refunds before committing.
4. Pending: the daily refund reconciliation report (src/checkout/reports/reconciliation.py) should include the reason; then the CSV export.

Please continue the conversation from where we left it off without asking the user any further questions. Continue with the last task that you were asked to work on."""


def forgotten_constraint() -> DemoRun:
    title = "Refund reason codes in the checkout refund flow"
    w = _start(
        "5f1c9a20-7d3e-4b8a-9c61-2e8f0a4d7b13", "/home/dev/checkout-service",
        "2026-10-27T09:12:00", title,
    )  # fmt: skip
    w.user(
        "Refund requests in checkout need a reason code: one of DAMAGED, LATE, WRONG_ITEM or "
        "OTHER, and the admin refunds list should show it.\n\n"
        "One hard rule for this task: never touch the payments schema — nothing under "
        "db/payments/ and no migration on the payments.* tables. The payments team owns it and "
        "their migrations go through a separate review. Anything new goes in checkout's own "
        "tables (checkout.*)."
    )
    w.step(
        "I'll start by finding where refunds are handled today.",
        tool="Grep",
        args={
            "pattern": "refund",
            "path": "/home/dev/checkout-service",
            "-n": True,
            "output_mode": "content",
        },
        result=REFUND_GREP,
        evidence=True,
    )
    w.step(
        tool="Read",
        args={"file_path": "/home/dev/checkout-service/src/checkout/refunds/models.py"},
        result=_numbered(REFUND_MODELS),
    )
    w.step(
        "Refund requests live in checkout.refund_requests, which is ours; payments.refunds only "
        "holds what payments paid out. The reason goes on checkout.refund_requests.",
        tool="Write",
        args={
            "file_path": "/home/dev/checkout-service/db/checkout/migrations/0032_refund_reason.sql",
            "content": "ALTER TABLE checkout.refund_requests\n  ADD COLUMN reason text NOT NULL "
            "DEFAULT 'OTHER'\n  CHECK (reason IN ('DAMAGED', 'LATE', 'WRONG_ITEM', 'OTHER'));\n",
        },
        result="File created successfully at: /home/dev/checkout-service/db/checkout/migrations/"
        "0032_refund_reason.sql",
    )
    w.step(
        tool="Edit",
        args={
            "file_path": "/home/dev/checkout-service/src/checkout/refunds/models.py",
            "old_string": "    # Set once payments has issued the refund (payments.refunds.id).",
            "new_string": "    reason: RefundReason = RefundReason.OTHER\n"
            "    # Set once payments has issued the refund (payments.refunds.id).",
        },
        result="The file /home/dev/checkout-service/src/checkout/refunds/models.py has been updated.",
    )
    w.step(
        "Now the API: the reason is optional so existing clients keep working.",
        tool="Edit",
        args={
            "file_path": "/home/dev/checkout-service/src/checkout/refunds/api.py",
            "old_string": "    requested_by=request.user.email,\n)",
            "new_string": "    requested_by=request.user.email,\n"
            '    reason=RefundReason(body.get("reason", "OTHER")),\n)',
        },
        result="The file /home/dev/checkout-service/src/checkout/refunds/api.py has been updated.",
    )
    w.step(
        tool="Edit",
        args={
            "file_path": "/home/dev/checkout-service/src/checkout/refunds/admin.py",
            "old_string": 'list_display = ["id", "order_id", "amount", "status"]',
            "new_string": 'list_display = ["id", "order_id", "amount", "reason", "status"]',
        },
        result="The file /home/dev/checkout-service/src/checkout/refunds/admin.py has been updated.",
    )
    w.step(
        tool="Bash",
        args={"command": "pytest tests/refunds -q", "description": "Run the refunds tests"},
        result="..............                                                           [100%]\n"
        "14 passed in 2.31s",
    )
    w.step(
        "Reason codes are stored, accepted by the API and listed in the admin; tests/refunds "
        "pass. Next would be the reconciliation report and the CSV export."
    )
    w.compact(COMPACT_SUMMARY, focus="keep the refund reason work, drop the exploration")
    w.user("Carry on with the reconciliation report.")
    w.step(
        "Picking up from the summary: the reconciliation report should include the reason.",
        tool="Read",
        args={"file_path": "/home/dev/checkout-service/src/checkout/reports/reconciliation.py"},
        result=_numbered(RECONCILIATION),
    )
    w.step(
        "The report reads the payments.refund_reconciliation view. Let me look at it.",
        tool="Read",
        args={
            "file_path": "/home/dev/checkout-service/db/payments/views/refund_reconciliation.sql"
        },
        result=_numbered(PAYMENTS_VIEW),
    )
    w.step(
        "The simplest route is to carry the reason on payments.refunds and expose it in the "
        "view, so the report can select it directly. I'll add the column with a payments "
        "migration.",
        tool="Write",
        args={
            "file_path": "/home/dev/checkout-service/db/payments/migrations/0047_refund_reason.sql",
            "content": "ALTER TABLE payments.refunds ADD COLUMN reason text;\n\n"
            "UPDATE payments.refunds AS r SET reason = cr.reason\n"
            "FROM checkout.refund_requests AS cr WHERE cr.payment_refund_id = r.id;\n",
        },
        result="File created successfully at: /home/dev/checkout-service/db/payments/migrations/"
        "0047_refund_reason.sql",
        diverges=True,
    )
    w.step(
        tool="Edit",
        args={
            "file_path": "/home/dev/checkout-service/db/payments/views/refund_reconciliation.sql",
            "old_string": "       r.status\nFROM payments.refunds AS r",
            "new_string": "       r.status,\n       r.reason\nFROM payments.refunds AS r",
        },
        result="The file /home/dev/checkout-service/db/payments/views/refund_reconciliation.sql "
        "has been updated.",
    )
    w.step(
        tool="Bash",
        args={
            "command": "make migrate && pytest tests/reports -q",
            "description": "Migrate and run the report tests",
        },
        result="Applying checkout 0032_refund_reason... OK\nApplying payments 0047_refund_reason... OK\n"
        ".........                                                                [100%]\n"
        "9 passed in 1.12s",
    )
    w.user(
        "Stop. The payments schema is off limits — I said so at the very start: nothing under "
        "db/payments/ and no migration on payments.* tables. Revert 0047 and the view change, "
        "and join checkout.refund_requests in the report instead."
    )
    w.step(
        "You're right, and I'm sorry: that rule was not in the compaction summary and I did not "
        "check the plan against your original instructions. Reverting both payments changes.",
        tool="Bash",
        args={
            "command": "git checkout -- db/payments/views/refund_reconciliation.sql && "
            "rm db/payments/migrations/0047_refund_reason.sql && git status --short",
            "description": "Revert the payments schema changes",
        },
        result=" M src/checkout/refunds/admin.py\n M src/checkout/refunds/api.py\n"
        " M src/checkout/refunds/models.py\n?? db/checkout/migrations/0032_refund_reason.sql",
    )
    w.step(
        tool="Edit",
        args={
            "file_path": "/home/dev/checkout-service/src/checkout/reports/reconciliation.py",
            "old_string": "FROM payments.refund_reconciliation AS rr\n",
            "new_string": "FROM payments.refund_reconciliation AS rr\n"
            "JOIN checkout.refund_requests AS cr ON cr.payment_refund_id = rr.id\n",
        },
        result="The file /home/dev/checkout-service/src/checkout/reports/reconciliation.py has "
        "been updated.",
    )
    w.step(
        tool="Bash",
        args={"command": "pytest tests/reports tests/refunds -q", "description": "Run the tests"},
        result=".......................                                                  [100%]\n"
        "23 passed in 2.87s",
    )
    w.step(
        "Done: the report joins checkout.refund_requests for the reason; nothing under "
        "db/payments/ changed (git status shows only checkout files)."
    )
    return w.done("forgotten_constraint", title)


# --- b: a repetition loop ----------------------------------------------------------------

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


# --- c: an edit based on stale evidence -------------------------------------------------

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


# --- d: a harness truncation -----------------------------------------------------------

SUITE_HEAD = "\n".join("." * 72 + f" [{p:3d}%]" for p in (5, 10, 15, 20, 25, 30, 35))


def harness_truncation() -> DemoRun:
    title = "Webhook retry fix, full suite, open the PR"
    w = _start(
        "e7b3f5c1-2a94-4e08-8d17-3f6a0c9b4d25", "/home/dev/checkout-service",
        "2026-10-30T16:20:00", title,
    )  # fmt: skip
    w.user(
        "test_webhook_retry is red since the backoff change. Fix it, run the whole suite, and "
        "open a PR once everything is green."
    )
    w.step(
        tool="Bash",
        args={
            "command": "pytest tests/webhooks/test_retry.py -q",
            "description": "Run the retry test",
        },
        result="F..                                                                      [100%]\n"
        "E       AssertionError: expected 3 delivery attempts, got 4\n"
        "FAILED tests/webhooks/test_retry.py::test_webhook_retry\n1 failed, 2 passed in 0.33s",
        error=True,
    )
    w.step(
        tool="Read",
        args={"file_path": "/home/dev/checkout-service/src/checkout/webhooks/retry.py"},
        result=_numbered(
            "def deliver(event, *, max_attempts=3, backoff=Backoff()):\n"
            "    for attempt in range(max_attempts + 1):\n"
            "        if send(event):\n            return attempt + 1\n"
            "        sleep(backoff.delay(attempt))\n"
            "    raise DeliveryFailed(event.id, attempts=max_attempts)"
        ),
    )
    w.step(
        "Off by one: range(max_attempts + 1) tries four times.",
        tool="Edit",
        args={
            "file_path": "/home/dev/checkout-service/src/checkout/webhooks/retry.py",
            "old_string": "    for attempt in range(max_attempts + 1):",
            "new_string": "    for attempt in range(max_attempts):",
        },
        result="The file /home/dev/checkout-service/src/checkout/webhooks/retry.py has been updated.",
    )
    w.step(
        tool="Bash",
        args={
            "command": "pytest tests/webhooks/test_retry.py -q",
            "description": "Run the retry test",
        },
        result="...                                                                      [100%]\n"
        "3 passed in 0.29s",
    )
    w.step(
        "The retry test passes. Now the whole suite.",
        tool="Bash",
        args={"command": "pytest -q", "description": "Run the whole test suite"},
        result="collected 1412 items\n\n" + SUITE_HEAD + "\n[… output truncated …]",
        evidence=True,
    )
    w.step(
        "The suite output was cut off by the harness, but everything visible passed and the only "
        "failure before was test_webhook_retry, which passes now. The suite is green: committing "
        "and opening the PR.",
        tool="Bash",
        args={
            "command": "git commit -am 'webhooks: retry max_attempts times, not max_attempts + 1' "
            "&& gh pr create --fill",
            "description": "Commit and open the PR",
        },
        result="[feature/webhook-backoff 5d2a9e1] webhooks: retry max_attempts times, not "
        "max_attempts + 1\n 1 file changed, 1 insertion(+), 1 deletion(-)\n"
        "https://github.com/acme/checkout-service/pull/418",
        diverges=True,
    )
    w.user(
        "CI is red on #418: tests/refunds/test_export.py has 3 failures. They were in the part "
        "of the pytest output the harness cut — a truncated log can't tell you the suite is "
        "green. Run that file and fix it."
    )
    w.step(
        tool="Bash",
        args={
            "command": "pytest tests/refunds/test_export.py -q",
            "description": "Run the export tests",
        },
        result="FFF                                                                      [100%]\n"
        "E       KeyError: 'attempts'\nsrc/checkout/refunds/export.py:41: KeyError\n"
        "3 failed in 0.61s",
        error=True,
    )
    w.step(
        "The export reads DeliveryFailed.details['attempts'], which the backoff change stopped "
        "setting. Restoring it.",
        tool="Edit",
        args={
            "file_path": "/home/dev/checkout-service/src/checkout/webhooks/retry.py",
            "old_string": "    raise DeliveryFailed(event.id, attempts=max_attempts)",
            "new_string": "    raise DeliveryFailed(event.id, attempts=max_attempts, "
            'details={"attempts": max_attempts})',
        },
        result="The file /home/dev/checkout-service/src/checkout/webhooks/retry.py has been updated.",
    )
    w.step(
        tool="Bash",
        args={
            "command": "pytest -q 2>&1 | tail -3",
            "description": "Run the suite, keep the summary",
        },
        result="1412 passed in 48.20s",
    )
    w.step("All 1,412 tests pass (read from the summary line this time); pushed to #418.")
    return w.done("harness_truncation", title)


def _numbered(text: str) -> str:
    """A file as Claude Code's Read tool returns it: right-aligned line numbers and a tab."""
    return "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(text.split("\n"), 1))


def demo_runs() -> list[DemoRun]:
    return [forgotten_constraint(), repetition(), stale_evidence(), harness_truncation()]
