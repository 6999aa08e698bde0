"""Compute, cache and queue the trace analytics. Requests read cached results; computing
happens in a job (after every ingest for the unfiltered view, on demand for filters)."""

from __future__ import annotations

import time
from dataclasses import asdict

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
from traces.analytics.selectors import AnalyticsFilters

JOB_KIND = "trace_analytics"
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


def analytics_compute(*, workspace: Workspace, filters: AnalyticsFilters, on_step=None) -> dict:
    """Every analysis for one filter set, as one JSON-ready dict."""
    step = on_step or (lambda name: None)
    step("loading columns")
    data = selectors.load(workspace, filters)
    cols = data.calls
    step("cost curve, growth and amplification")
    result = {
        "filters": filters.as_dict(),
        "filters_text": filters.describe(),
        "calls": len(cols),
        "agents": len(np.unique(cols.agent)) if len(cols) else 0,
        "sessions": len(np.unique(data.call_session)) if len(cols) else 0,
        "cost_curve": cost_curve(cols, band=filters.band).as_dict(),
        "growth": growth_by_band(cols, band=filters.band).as_dict(),
        "amplification": read_amplification(cols, band=filters.band).as_dict(),
    }
    step("steps per agent")
    starts = agent_starts(cols.agent)
    sizes = np.diff(np.r_[starts, len(cols)]) if len(cols) else np.zeros(0, dtype=np.int64)
    ids = cols.agent[starts] if len(cols) else np.zeros(0, dtype=np.int64)
    kinds = np.array(
        [data.agents[int(a)].kind if int(a) in data.agents else "main" for a in ids], dtype=object
    )
    result["steps"] = {
        "all": asdict(step_distribution(sizes, "all agents")),
        "main": asdict(step_distribution(sizes[kinds == "main"], "main threads")),
        "subagents": asdict(
            step_distribution(sizes[kinds == "subagent"], "single-directive subagents")
        ),
    }
    step("compactions and cycle parameters")
    result["compactions"] = compaction_summary(data.compactions).as_dict()
    penalties = penalty_per_compaction(cols, data.compactions, filters.window)
    measured = cycle_parameters(
        cols,
        data.compactions,
        upper_from=filters.upper_from,
        window=filters.window,
        penalties=penalties,
    )
    result["cycle_parameters"] = measured.as_dict()
    params = measured.params()
    if params is not None:
        result["cycle"] = _cycle_block(params)
    step("thresholds per task type")
    result["task_types"] = _per_task_type(data, filters, penalties)
    step("reference coverage")
    result["coverage"] = coverage(data.touches, cycle=params).as_dict()
    step("incidents")
    days = np.array(
        [
            d.strftime("%Y-%m-%d")
            for d in (
                np.asarray(cols.timestamp, dtype="datetime64[s]").astype(object)
                if len(cols)
                else []
            )
        ],
        dtype=object,
    )
    result["incidents"] = incidents(
        cols.agent, days, cols.billed.astype(np.float64), data.agents, fork_bound=filters.fork_bound
    ).as_dict()
    return _json(result)


def _cycle_block(params: CycleParams) -> dict:
    model = evaluate(params, thresholds=[150_000, 200_000, 300_000, 400_000, 600_000, 900_000])
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

    start = time.perf_counter()
    result = analytics_compute(workspace=workspace, filters=filters, on_step=on_step)
    elapsed = time.perf_counter() - start
    analytics_store(
        workspace=workspace,
        filters=filters,
        data_version=version,
        result=result,
        seconds=elapsed,
        job=job,
    )
    reporter.set_counts(step="done", calls=result["calls"], seconds=round(elapsed, 2))
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
    *, workspace: Workspace, filters: AnalyticsFilters | None = None, user=None
) -> Job:
    """Queue a computation unless one for these filters is already queued, or running on
    the current data version. A job running on older data is left to finish (its result
    is marked stale) and a new one is queued behind it."""
    filters = filters or AnalyticsFilters()
    current = (
        Workspace.objects.filter(pk=workspace.pk).values_list("data_version", flat=True).first()
    )
    pending = Job.objects.filter(
        workspace=workspace,
        kind=JOB_KIND,
        status__in=[JobStatus.QUEUED, JobStatus.RUNNING],
        params__key=filters.key,
    ).order_by("-created_at")
    for job in pending:
        if _reusable(job, current):
            return job
    from traces.analytics.tasks import compute_analytics

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
        job_enqueue(job=job, task=compute_analytics)
    return job
