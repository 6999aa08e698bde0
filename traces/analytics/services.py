"""Compute, cache and queue the trace analytics. Requests read cached results; computing
happens in a job (after every ingest for the unfiltered view, on demand for filters)."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import orjson
from django.db import transaction
from django.utils import timezone

from governance.models import Job, JobStatus, Workspace
from governance.services import JobReporter, job_create, job_enqueue
from traces.analysis.compactions import compaction_summary, cycle_parameters, penalty_per_compaction
from traces.analysis.costs import (
    CallColumns,
    agent_starts,
    cost_curve,
    growth_by_band,
    read_amplification,
    step_distribution,
)
from traces.analysis.coverage import coverage
from traces.analysis.cycle import CycleParams, evaluate, sensitivity, tail_scenario
from traces.analysis.incidents import incidents
from traces.analysis.task_types import LABELS
from traces.analytics import selectors
from traces.analytics.models import AnalyticsResult
from traces.analytics.selectors import JOB_KIND, AnalyticsFilters

logger = logging.getLogger(__name__)

SENSITIVITY_PENALTIES = [0, 10, 20, 28, 40, 55, 65, 80, 100, 113, 138, 145]
TASK_TYPE_BOOTSTRAP = 400


def _json(value) -> dict:
    """numpy arrays and scalars, tuples and NaN into plain JSON values (NaN becomes null)."""
    return orjson.loads(
        orjson.dumps(
            value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS, default=_fallback
        )
    )


def _fallback(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")


class SectionUnavailable(Exception):
    """The data cannot give this section; the message says why, for users."""


# (key, label, compute(values so far) -> value, keys of the sections it needs)
Section = tuple[str, str, Callable[[dict], Any], tuple[str, ...]]


def run_sections(
    sections: list[Section],
    *,
    on_start: Callable[[str], None] | None = None,
    on_error: Callable[[str, str], None] | None = None,
) -> tuple[dict, dict[str, str]]:
    """Run each section on its own: one that raises gets a reason users can read (its
    traceback goes to `on_error`, not to the log), and a section that needs it is skipped
    with the reason. Returns (values, {key: reason}); a failed section's value is None."""
    values: dict = {}
    failures: dict[str, str] = {}
    labels = {key: label for key, label, _, _ in sections}
    for key, label, compute, needs in sections:
        values[key] = None
        missing = [labels[name] for name in needs if name in failures]
        if missing:
            failures[key] = (
                f"{_sentence(label)} needs {' and '.join(missing)}, which could not be computed."
            )
            continue
        if on_start:
            on_start(key)
        try:
            values[key] = compute(values)
        except SectionUnavailable as exc:
            failures[key] = str(exc)
        except Exception as exc:
            failures[key] = (
                f"{_sentence(label)} could not be computed ({type(exc).__name__}: {exc})."
            )
            logger.warning("analytics section %s failed: %s", key, failures[key])
            logger.debug("analytics section %s failed", key, exc_info=True)
            if on_error:
                on_error(key, traceback.format_exc())
    return values, failures


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


# The progress step each section starts (see analytics_job_run).
SECTION_STEPS = {
    "cost_curve": "cost curve, growth and amplification",
    "steps": "steps per agent",
    "compactions": "compactions and cycle parameters",
    "task_types": "thresholds per task type",
    "coverage": "reference coverage",
    "incidents": "incidents",
}
# Values computed for other sections, not stored in the result.
INTERNAL_SECTIONS = {"penalties"}


def analytics_compute(
    *, workspace: Workspace, filters: AnalyticsFilters, on_step=None, on_error=None
) -> dict:
    """Every analysis for one filter set, as one JSON-ready dict. Each section succeeds or
    fails alone: `failures` maps a failed section to the reason, and its value is None."""
    step = on_step or (lambda name: None)
    step("loading columns")
    data = selectors.load(workspace, filters)
    cols = data.calls

    def on_start(key):
        if key in SECTION_STEPS:
            step(SECTION_STEPS[key])

    sections = (
        _sections(data, filters)
        + _post_compaction_sections(workspace, filters)
        + _usage_sections(workspace, filters)
    )
    values, failures = run_sections(sections, on_start=on_start, on_error=on_error)
    result = {
        "filters": filters.as_dict(),
        "filters_text": filters.describe(),
        "calls": len(cols),
        "agents": len(np.unique(cols.agent)) if len(cols) else 0,
        "sessions": len(np.unique(data.call_session)) if len(cols) else 0,
        **{
            key: value.as_dict() if hasattr(value, "as_dict") else value
            for key, value in values.items()
            if key not in INTERNAL_SECTIONS
        },
        "failures": failures,
    }
    return _json(result)


def _sections(data, filters: AnalyticsFilters) -> list[Section]:
    cols = data.calls

    def measured(done):
        return cycle_parameters(
            cols,
            data.compactions,
            upper_from=filters.upper_from,
            window=filters.window,
            penalties=done["penalties"],
        )

    def cycle(done):
        measured = done["cycle_parameters"]
        params = measured.params()
        if params is None:
            raise SectionUnavailable(" ".join(measured.reasons))
        return _cycle_block(params)

    def coverage_section(done):
        measured = done["cycle_parameters"]
        return coverage(data.touches, cycle=measured.params() if measured else None)

    return [
        ("cost_curve", "the cost curve", lambda _: cost_curve(cols, band=filters.band), ()),
        ("growth", "the growth per step", lambda _: growth_by_band(cols, band=filters.band), ()),
        ("amplification", "the read amplification", lambda _: read_amplification(cols, band=filters.band), ()),
        ("steps", "the steps per agent", lambda _: _steps(data), ()),
        ("compactions", "the compaction summary", lambda _: compaction_summary(data.compactions), ()),
        ("penalties", "P per compaction", lambda _: penalty_per_compaction(cols, data.compactions, filters.window), ()),
        ("cycle_parameters", "the cycle parameters", measured, ("penalties",)),
        ("cycle", "the cycle model", cycle, ("cycle_parameters",)),
        ("task_types", "the thresholds per task type", lambda done: _per_task_type(data, filters, done["penalties"]), ("penalties",)),
        ("coverage", "the reference coverage", coverage_section, ()),
        ("incidents", "the incidents", lambda _: _incidents(data, filters), ()),
    ]  # fmt: skip


def _post_compaction_sections(workspace: Workspace, filters: AnalyticsFilters) -> list[Section]:
    from traces.analytics.post_compaction_compute import post_compaction_section

    def compute(_):
        result = post_compaction_section(workspace=workspace, filters=filters)
        if not result["compactions"]:
            raise SectionUnavailable(
                "No main-thread run starts at a full compaction under these filters: "
                "there are no steps since a compaction to measure."
            )
        return result

    return [("post_compaction", "the behaviour after compaction", compute, ())]


def _usage_sections(workspace: Workspace, filters: AnalyticsFilters) -> list[Section]:
    """Tokens by model, priced when shown (traces.pricing) so a price edit needs no rerun."""
    from traces.pricing.selectors import usage_rows, usage_rows_by_agent_type

    def by_model(_):
        return usage_rows(calls=selectors.selected_calls(workspace, filters))

    def by_agent_type(_):
        return usage_rows_by_agent_type(calls=selectors.selected_calls(workspace, filters))

    return [
        ("usage_by_model", "the tokens by model", by_model, ()),
        ("usage_by_agent_type", "the tokens by agent type", by_agent_type, ()),
    ]


def _steps(data) -> dict:
    cols = data.calls
    starts = agent_starts(cols.agent)
    sizes = np.diff(np.r_[starts, len(cols)]) if len(cols) else np.zeros(0, dtype=np.int64)
    ids = cols.agent[starts] if len(cols) else np.zeros(0, dtype=np.int64)
    kinds = np.array(
        [data.agents[int(a)].kind if int(a) in data.agents else "main" for a in ids], dtype=object
    )
    return {
        "all": asdict(step_distribution(sizes, "all agents")),
        "main": asdict(step_distribution(sizes[kinds == "main"], "main threads")),
        "subagents": asdict(
            step_distribution(sizes[kinds == "subagent"], "single-directive subagents")
        ),
    }


def _incidents(data, filters: AnalyticsFilters):
    cols = data.calls
    days = cols.timestamp.astype("datetime64[s]").astype("datetime64[D]")  # UTC dates
    return incidents(
        cols.agent, days, cols.billed.astype(np.float64), data.agents, fork_bound=filters.fork_bound
    )


CYCLE_THRESHOLDS = [150_000, 200_000, 300_000, 400_000, 600_000, 900_000]


def _cycle_block(params: CycleParams) -> dict:
    # Ratios only at thresholds above S: at or below it no cycle fits.
    model = evaluate(params, thresholds=[t for t in CYCLE_THRESHOLDS if t > params.post_compaction])
    tail = tail_scenario(params, 60_000, params.penalty_steps / 2)
    return {
        "params": asdict(params),
        "model": model.as_dict(),
        "sensitivity": sensitivity(params, SENSITIVITY_PENALTIES),
        "tail": {
            "tail_tokens": 60_000,
            "penalty_steps": tail.penalty_steps,
            "model": evaluate(tail).as_dict(),
        },
    }


def _per_task_type(data, filters: AnalyticsFilters, penalties: np.ndarray) -> list[dict]:
    """Each task type's own S, SUMM and P (from the compactions that ended a run of that
    type) and D (from its calls), with the number of compactions behind the figure."""
    rows = []
    comp, cols = data.compactions, data.calls
    for task_type, label in LABELS.items():
        compaction_mask = comp.task_type == task_type
        call_mask = data.call_task_type == task_type
        if not compaction_mask.any() and not call_mask.any():
            continue
        own_calls = CallColumns(
            *(getattr(cols, f)[call_mask] for f in CallColumns.__dataclass_fields__)
        )
        measured = cycle_parameters(
            cols,
            comp.subset(compaction_mask),
            upper_from=filters.upper_from,
            window=filters.window,
            bootstrap=TASK_TYPE_BOOTSTRAP,
            growth_cols=own_calls,
            penalties=penalties[compaction_mask],
        )
        rows.append(
            {
                "task_type": task_type,
                "label": label,
                "compactions": int(compaction_mask.sum()),
                "calls": int(call_mask.sum()),
                "reasons": measured.reasons,
                "S": measured.post_compaction.value,
                "D": measured.growth_per_step.value,
                "SUMM": measured.summary.value,
                "P": measured.penalty_steps.value,
                "P_ci": measured.penalty_steps.ci,
                "optimum_threshold": measured.optimum_threshold,
                "optimum_ci": measured.optimum_ci,
            }
        )
    return rows


# --- caching and jobs ----------------------------------------------------------------


def analytics_store(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters,
    data_version: int,
    result: dict,
    seconds: float,
    job=None,
) -> AnalyticsResult:
    stored, _ = AnalyticsResult.objects.update_or_create(
        workspace=workspace,
        filter_key=filters.key,
        defaults={
            "filters": filters.as_dict(),
            "data_version": data_version,
            "result": result,
            "seconds": seconds,
            "job": job,
        },
    )
    return stored


def analytics_job_run(job: Job, reporter: JobReporter) -> None:
    workspace = job.workspace
    workspace.refresh_from_db(fields=["data_version"])
    filters = AnalyticsFilters(**job.params.get("filters", {}))
    version = workspace.data_version
    # Recorded first, so that analytics_refresh_queue can tell whether this run already
    # sees the latest traces or an ingest has landed since it read them.
    reporter.set_counts(data_version=version)
    reporter.flush(force=True)
    steps = [
        "loading columns",
        "cost curve, growth and amplification",
        "steps per agent",
        "compactions and cycle parameters",
        "thresholds per task type",
        "reference coverage",
        "incidents",
    ]
    reporter.set_total(len(steps), unit="analyses")

    def on_step(name):
        reporter.set_done(steps.index(name))
        reporter.set_counts(step=name)
        reporter.flush(force=True)

    def on_error(section, details):
        # Kept on the job for whoever debugs it; the log gets one line, not a traceback.
        reporter.error(f"{section}: {details.strip().splitlines()[-1]}", traceback=details)

    start = time.perf_counter()
    result = analytics_compute(
        workspace=workspace, filters=filters, on_step=on_step, on_error=on_error
    )
    elapsed = time.perf_counter() - start
    analytics_store(
        workspace=workspace,
        filters=filters,
        data_version=version,
        result=result,
        seconds=elapsed,
        job=job,
    )
    reporter.set_counts(
        step="done",
        calls=result["calls"],
        seconds=round(elapsed, 2),
        failed_sections=sorted(result["failures"]),
    )
    workspace.refresh_from_db(fields=["data_version"])
    if workspace.data_version != version:
        # Traces changed while this ran: what was stored is already stale. Queue the next
        # computation (or join one an ingest queued meanwhile).
        followup = analytics_refresh_queue(workspace=workspace, filters=filters)
        reporter.set_counts(followup_job=followup.pk)


def _reusable(job: Job, data_version: int) -> bool:
    """A queued job reads the data version when it starts, so it will see the latest
    traces; a running one only if the version it read is the current one."""
    if job.status == JobStatus.QUEUED:
        return True
    return (job.counts or {}).get("data_version") == data_version


def analytics_refresh_queue(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters | None = None,
    user=None,
    retry_failed: bool = True,
) -> Job:
    """Queue a computation unless one for these filters is already queued, or running on
    the current data version. A job running on older data is left to finish (its result
    is marked stale) and a new one is queued behind it.

    With `retry_failed` False (a page or API read), a computation that failed on the
    current data version is returned instead of queued again: it would fail the same way,
    so only an explicit request (or new traces) computes it again."""
    filters = filters or AnalyticsFilters()
    current = (
        Workspace.objects.filter(pk=workspace.pk).values_list("data_version", flat=True).first()
    )
    if not retry_failed:
        latest = selectors.latest_job(workspace=workspace, filters=filters)
        if selectors.failed_on(latest, current):
            return latest
    pending = Job.objects.filter(
        workspace=workspace,
        kind=JOB_KIND,
        status__in=[JobStatus.QUEUED, JobStatus.RUNNING],
        params__key=filters.key,
    ).order_by("-created_at")
    for job in pending:
        if _reusable(job, current):
            return job
    with transaction.atomic():
        job = job_create(
            workspace=workspace,
            kind=JOB_KIND,
            user=user,
            label=f"Trace analytics: {filters.describe()}",
            params={
                "filters": filters.as_dict(),
                "key": filters.key,
                "requested_at": timezone.now().isoformat(),
                "data_version": current,
            },
            progress_unit="analyses",
        )
        job_enqueue(job=job, task="traces.compute_analytics")
    return job
