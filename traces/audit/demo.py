"""Demo utility audit: two runs from each stratum of the demo traces, with a few steps judged
by a person and by an LLM judge (so the results page has agreement to show).

Idempotent: the audit is created once, by name; judging a step again by the same judge
replaces the answer with the same one.
"""

from __future__ import annotations

import random

from traces.audit import services
from traces.audit.analysis.sampling import strata_counts
from traces.audit.models import Audit, AuditStep

DEMO_NAME = "Demo: two runs from every stratum"
LLM_JUDGE = "demo LLM judge (prompt v1)"
JUDGED_STEPS = 12


def _answer(step: AuditStep, rng: random.Random, lenient: bool) -> dict:
    """A plausible answer: the latest few items are active, sometimes the summary too."""
    had = step.had_through_item
    recent = list(range(max(1, had - rng.randint(1, 4)), had + 1)) if had else []
    if had > 8 and rng.random() < 0.3:
        recent = [1, *recent]
    helpful = [i for i in range(max(1, had - 10), max(1, had - 4)) if rng.random() < 0.3]
    verbatim = rng.random() < 0.2
    classes = ["unaffected"] * 8 + ["slightly_degraded"] * 2 + ["materially_degraded"]
    return {
        "active_item_ids": recent,
        "helpful_item_ids": [i for i in helpful if i not in recent],
        "verbatim_needed": verbatim and not lenient,
        "counterfactual": rng.choice(classes),
        "confidence": rng.choice(["medium", "high", "high"]),
    }


def seed(*, workspace, users, stdout) -> None:
    audit = Audit.objects.filter(workspace=workspace, name=DEMO_NAME).first()
    if audit is None:
        counts = strata_counts(services.run_infos(workspace=workspace))
        if not counts:
            stdout.write("  no runs: no demo audit")
            return
        audit = services.audit_create(
            workspace=workspace, actor=users["reviewer"], name=DEMO_NAME,
            strata_sizes=dict.fromkeys(counts, 6), seed=2026, build_now=True,
        )  # fmt: skip
    steps = AuditStep.objects.filter(packet__audit=audit).select_related("packet__audit")
    steps = list(steps.order_by("packet__position", "number")[:JUDGED_STEPS])
    for step in steps:
        for kind, lenient in (("human", False), ("llm", True)):
            answer = _answer(
                step, random.Random(f"{step.packet.run_id}-{step.number}-{kind}"), lenient
            )
            services.judgment_record(
                step=step, actor=users["editor"], judge_kind=kind,
                judge_label=LLM_JUDGE if kind == "llm" else "", **answer,
            )  # fmt: skip
    stdout.write(
        f"  audit '{audit.name}': {audit.packet_count} packets, {len(steps)} steps judged twice"
    )
