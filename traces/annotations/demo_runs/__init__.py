"""Demo runs that go wrong: four hand-written Claude Code sessions, one per failure an annotator
must learn to spot (a constraint forgotten after a compaction, a repetition loop, an edit on
stale evidence, a harness truncation). Pure: no Django.

Each run's evidence is in its text (prompts, assistant text, tool calls and results, the
compaction summary), and its token usage grows with what the window holds. `expected_call`
(the first divergence) is for tests only: the demo never shows it, so marking stays blind.

A package: the transcript writer (`transcript.py`) and one module per run (`constraint.py`,
`loop.py`, `stale.py`, `truncation.py`).
"""

from traces.annotations.demo_runs.catalog import demo_runs
from traces.annotations.demo_runs.constraint import (
    COMPACT_SUMMARY,
    PAYMENTS_VIEW,
    RECONCILIATION,
    REFUND_GREP,
    REFUND_MODELS,
    forgotten_constraint,
)
from traces.annotations.demo_runs.loop import DUE_FAILURE, DUE_TEST, INVOICES, repetition
from traces.annotations.demo_runs.stale import INVOICE_LINES, TAX_AFTER, TAX_BEFORE, stale_evidence
from traces.annotations.demo_runs.transcript import (
    MODEL,
    SYSTEM_TOKENS,
    VERSION,
    DemoRun,
    tokens_of,
)
from traces.annotations.demo_runs.truncation import SUITE_HEAD, harness_truncation

__all__ = [
    "COMPACT_SUMMARY",
    "DUE_FAILURE",
    "DUE_TEST",
    "INVOICES",
    "INVOICE_LINES",
    "MODEL",
    "PAYMENTS_VIEW",
    "RECONCILIATION",
    "REFUND_GREP",
    "REFUND_MODELS",
    "SUITE_HEAD",
    "SYSTEM_TOKENS",
    "TAX_AFTER",
    "TAX_BEFORE",
    "VERSION",
    "DemoRun",
    "demo_runs",
    "forgotten_constraint",
    "harness_truncation",
    "repetition",
    "stale_evidence",
    "tokens_of",
]
