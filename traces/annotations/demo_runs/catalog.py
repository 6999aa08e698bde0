"""The four demo runs, in the order the demo ingests them. Pure: no Django."""

from __future__ import annotations

from traces.annotations.demo_runs.constraint import forgotten_constraint
from traces.annotations.demo_runs.loop import repetition
from traces.annotations.demo_runs.stale import stale_evidence
from traces.annotations.demo_runs.transcript import DemoRun
from traces.annotations.demo_runs.truncation import harness_truncation


def demo_runs() -> list[DemoRun]:
    return [forgotten_constraint(), repetition(), stale_evidence(), harness_truncation()]
