"""Writes of the utility audit: create an audit (a job samples and builds its packets), record
judgments. Atomic and audited; bad input raises governance.errors.InputError naming the field.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np
import orjson
import zstandard
from django.db import transaction

from governance.errors import Forbidden, InputError
from governance.models import Job, Membership, Role, Workspace
from governance.services import JobReporter, audit_record, job_create, job_enqueue
from traces.annotations.analysis.classes import CONFIDENCES
from traces.audit.analysis import packets as packet_analysis
from traces.audit.analysis import sampling
from traces.audit.analysis.fractions import COUNTERFACTUALS
from traces.audit.models import (
    Audit,
    AuditPacket,
    AuditStatus,
    AuditStep,
    JudgeKind,
    Judgment,
)
from traces.ingest.writes import decompress_text
from traces.models import AgentKind, Call, CallText, Compaction, Run, StartKind, TaskType

CREATE_ROLE = Role.REVIEWER
JUDGE_ROLE = Role.EDITOR
MAX_PER_STRATUM = 500
MAX_PACKETS = 2000
MAX_ITEMS = 5000
MAX_NOTE = 5000
DIRECTIVE_LOOKBACK = 200  # calls searched before a run for the operator message it works under


def _require_role(workspace: Workspace, user, role: int, what: str) -> None:
    membership = Membership.objects.filter(workspace=workspace, user=user).first()
    if (membership.role if membership else 0) < role:
        raise Forbidden(f"{what} needs the {Role(role).label} role in {workspace.slug}.")


def run_infos(*, workspace: Workspace, exclude_forks: bool = True) -> list[sampling.RunInfo]:
    """Every judgeable run of the workspace (not the compaction summariser's; with
    `exclude_forks`, not an agent that started as a fork of a loaded parent, as the analytics
    filter does), with the context tokens of its calls in session order, the order
    `build_run_packet` reads them in, so that a step's position names the same call there."""
    runs = Run.objects.filter(workspace=workspace).exclude(agent__kind=AgentKind.COMPACTION)
    if exclude_forks:
        runs = runs.exclude(agent__start_kind=StartKind.FORK)
    rows = list(
        runs.order_by().values_list(
            "id", "task_type", "median_context", "agent_id", "first_call_index", "last_call_index"
        )
    )
    if not rows:
        return []
    agents = np.unique(np.fromiter((r[3] for r in rows), dtype=np.int64, count=len(rows)))
    calls = np.array(
        Call.objects.filter(workspace=workspace, agent_id__in=agents.tolist())
        .order_by()
        .values_list("agent_id", "session_index", "context_tokens"),
        dtype=np.int64,
    ).reshape(-1, 3)
    # One sortable key per call: (agent, session index); a run is a slice of it.
    keys = (calls[:, 0] << 32) | calls[:, 1]
    order = np.argsort(keys, kind="stable")
    keys, contexts = keys[order], calls[order, 2]
    infos = []
    for run_id, task_type, median, agent_id, first, last in rows:
        low = np.searchsorted(keys, (agent_id << 32) | first, side="left")
        high = np.searchsorted(keys, (agent_id << 32) | last, side="right")
        infos.append(
            sampling.RunInfo(run_id, task_type, median, tuple(contexts[low:high].tolist()))
        )
    return infos


def clean_strata_sizes(sizes: Mapping, *, band_edges: Sequence[int]) -> dict[str, int]:
    """Steps per stratum keyed 'task_type|band', whole numbers 0…MAX_PER_STRATUM; zeros
    dropped."""
    if not isinstance(sizes, Mapping):
        raise InputError("strata_sizes: give an object of 'task_type|band': steps.")
    bands = set(sampling.band_labels(band_edges))
    clean, errors = {}, []
    for key, value in sizes.items():
        task, _, band = str(key).partition("|")
        if task not in TaskType.values or band not in bands:
            errors.append(
                f"'{key}' is not a stratum: use task_type|band with a task type of "
                f"{', '.join(TaskType.values)} and a band of {', '.join(sorted(bands))}"
            )
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            errors.append(f"'{key}': {value!r} is not a whole number of steps, 0 or more")
        elif value > MAX_PER_STRATUM:
            errors.append(f"'{key}': at most {MAX_PER_STRATUM} steps per stratum")
        elif value:
            clean[str(key)] = value
    if errors:
        raise InputError(
            "strata_sizes: " + "; ".join(errors) + ".", payload={"field": "strata_sizes"}
        )
    if not clean:
        raise InputError("strata_sizes: ask for at least one step in one stratum.")
    return clean


def audit_create(
    *,
    workspace: Workspace,
    actor,
    name: str,
    strata_sizes: Mapping,
    seed: int | None = None,
    band_edges: Sequence[int] | None = None,
    exclude_forks: bool = True,
    build_now: bool = False,
) -> Audit:
    """A new audit; a job samples its steps and builds one packet per sampled run
    (`build_now`: built here, without a job, as the demo does). `exclude_forks` (the default)
    leaves out agents that started as forks of a loaded parent."""
    _require_role(workspace, actor, CREATE_ROLE, "Creating an audit")
    name = (name or "").strip()
    if not name:
        raise InputError("name: give the audit a name.")
    edges = list(band_edges or sampling.DEFAULT_BAND_EDGES)
    if edges != sorted(set(edges)) or any(not isinstance(e, int) or e <= 0 for e in edges):
        raise InputError("band_edges: give increasing whole token counts above 0.")
    sizes = clean_strata_sizes(strata_sizes, band_edges=edges)
    if not isinstance(exclude_forks, bool):
        raise InputError("exclude_forks: true or false.")
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    sample = sampling.sample_steps(
        run_infos(workspace=workspace, exclude_forks=exclude_forks), sizes, seed=seed,
        edges=edges,
    )  # fmt: skip
    total = len(sample)
    steps = sum(len(s.step_positions) for s in sample)
    if total == 0:
        raise InputError(
            "strata_sizes: no steps in the chosen strata. Choose strata that have steps "
            "(the create page lists them with their counts).",
            payload={"field": "strata_sizes"},
        )
    if total > MAX_PACKETS:
        raise InputError(
            f"strata_sizes: at most {MAX_PACKETS:,} runs (packets) in one audit; these sizes "
            f"draw {total:,}."
        )
    with transaction.atomic():
        audit = Audit.objects.create(
            workspace=workspace,
            name=name[:200],
            strata_sizes=sizes,
            band_edges=edges,
            seed=seed,
            exclude_forks=exclude_forks,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        if build_now:
            audit_record(
                workspace=workspace, actor=actor, action="audit.create", obj=audit,
                data={"strata_sizes": sizes, "seed": seed, "runs": total, "steps": steps,
                      "exclude_forks": exclude_forks},
            )  # fmt: skip
            return audit_build_packets(audit=audit)
        job = job_create(
            workspace=workspace,
            kind="audit_build",
            user=actor,
            label=f"Build packets of audit “{audit.name}”",
            params={"audit_id": audit.pk},
            progress_total=total,
            progress_unit="packets",
        )
        audit.job = job
        audit.save(update_fields=["job"])
        audit_record(
            workspace=workspace,
            actor=actor,
            action="audit.create",
            obj=audit,
            data={
                "strata_sizes": sizes,
                "seed": seed,
                "runs": total,
                "steps": steps,
                "exclude_forks": exclude_forks,
            },
        )
        job_enqueue(job=job, task="audit.build_packets")
    return audit


def _compress(packet: dict) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(orjson.dumps(packet))


def packet_decompress(data: bytes | memoryview) -> dict:
    return orjson.loads(zstandard.ZstdDecompressor().decompress(bytes(data)))


def _directive_before(run: dict) -> str:
    """The latest operator message the agent received before the run started."""
    ids = list(
        Call.objects.filter(agent_id=run["agent_id"], session_index__lt=run["first_call_index"])
        .order_by("-session_index")
        .values_list("id", flat=True)[:DIRECTIVE_LOOKBACK]
    )
    texts = dict(CallText.objects.filter(call_id__in=ids).values_list("call_id", "data"))
    for call_id in ids:
        if call_id in texts:
            prompt = decompress_text(texts[call_id]).get("prompt")
            if isinstance(prompt, str) and prompt.strip():
                return prompt
    return ""


def build_run_packet(
    *, run: dict, positions: Sequence[int], band: str, edges: Sequence[int]
) -> tuple[packet_analysis.Packet, list[dict]]:
    """One run's packet and its steps' rows, from the database."""
    calls = list(
        Call.objects.filter(
            agent_id=run["agent_id"],
            session_index__gte=run["first_call_index"],
            session_index__lte=run["last_call_index"],
        )
        .order_by("session_index")
        .values_list("id", "session_index", "context_tokens")
    )
    chosen = [calls[p] for p in positions if p < len(calls)]
    last = chosen[-1][1] if chosen else -1
    calls = [c for c in calls if c[1] <= last]
    texts = dict(
        CallText.objects.filter(call_id__in=[c[0] for c in calls]).values_list("call_id", "data")
    )
    inputs = [
        packet_analysis.CallInput(
            index, context, decompress_text(texts[call_id]) if call_id in texts else None
        )
        for call_id, index, context in calls
    ]
    has_prompt = any(
        isinstance((c.text or {}).get("prompt"), str) and c.text["prompt"].strip() for c in inputs
    )
    packet = packet_analysis.build_packet(
        run_id=run["id"],
        session_id=run["session_id"],
        agent_id=run["agent_id"],
        task_type=run["task_type"],
        band=band,
        calls=inputs,
        step_call_indexes=[c[1] for c in chosen],
        directive_before="" if has_prompt else _directive_before(run),
        summary_tokens=run["summary_tokens"],
    )
    steps = [
        {
            "number": step.number,
            "call_index": step.call_index,
            "window_tokens": step.window_tokens,
            "band": sampling.band_of(step.window_tokens, edges),
            "had_through_item": step.had_through_item,
        }
        for step in packet.steps
    ]
    return packet, steps


def audit_build_run(job: Job, reporter: JobReporter) -> None:
    """Job work: sample the audit's steps and build their packets (idempotent: starts over)."""
    audit = Audit.objects.filter(pk=job.params["audit_id"], workspace=job.workspace).first()
    if audit is None:
        raise InputError("the audit was deleted before its packets were built")
    if audit.status in {AuditStatus.OPEN, AuditStatus.CLOSED}:
        return  # built already (a job sent again): rebuilding would drop its judgments
    try:
        audit_build_packets(audit=audit, reporter=reporter)
    except Exception:
        Audit.objects.filter(pk=audit.pk).update(status=AuditStatus.FAILED)
        raise


def audit_build_packets(*, audit: Audit, reporter: JobReporter | None = None) -> Audit:
    edges = audit.band_edges or list(sampling.DEFAULT_BAND_EDGES)
    infos = run_infos(workspace=audit.workspace, exclude_forks=audit.exclude_forks)
    sample = sampling.sample_steps(infos, audit.strata_sizes, seed=audit.seed, edges=edges)
    runs = {
        row["id"]: row
        for row in Run.objects.filter(pk__in=[s.run_id for s in sample]).values(
            "id", "session_id", "agent_id", "task_type", "first_call_index", "last_call_index",
            "started_by_id",
        )
    }  # fmt: skip
    summaries = dict(
        Compaction.objects.filter(
            pk__in=[r["started_by_id"] for r in runs.values() if r["started_by_id"]]
        ).values_list("id", "summary_tokens")
    )
    for row in runs.values():
        row["summary_tokens"] = summaries.get(row["started_by_id"])
    if reporter:
        reporter.set_total(len(sample), unit="packets")
    AuditPacket.objects.filter(audit=audit).delete()
    steps_total = 0
    for position, sampled in enumerate(sample, start=1):
        packet, steps = build_run_packet(
            run=runs[sampled.run_id], positions=sampled.step_positions, band=sampled.band,
            edges=edges,
        )  # fmt: skip
        with transaction.atomic():
            row = AuditPacket.objects.create(
                audit=audit,
                run_id=sampled.run_id,
                position=position,
                task_type=sampled.task_type,
                band=sampled.band,
                item_count=len(packet.items),
                item_tokens=packet.item_tokens,
                data=_compress(packet.to_dict()),
            )
            AuditStep.objects.bulk_create(AuditStep(packet=row, **step) for step in steps)
        steps_total += len(steps)
        if reporter:
            reporter.advance()
            reporter.count(steps=len(steps))
    with transaction.atomic():
        Audit.objects.filter(pk=audit.pk).update(
            status=AuditStatus.OPEN, packet_count=len(sample), step_count=steps_total
        )
        audit.refresh_from_db()
        audit_record(
            workspace=audit.workspace,
            actor=None,
            action="audit.build",
            obj=audit,
            data={"packets": len(sample), "steps": steps_total},
        )
    return audit


def _item_ids(field: str, ids, step: AuditStep) -> list[int]:
    if not isinstance(ids, list | tuple):
        raise InputError(f"{field}: give a list of item numbers.", payload={"field": field})
    if len(ids) > MAX_ITEMS:
        raise InputError(f"{field}: at most {MAX_ITEMS:,} items.", payload={"field": field})
    bad = packet_analysis.invalid_item_ids(ids, step.had_through_item)
    if bad:
        shown = ", ".join(repr(b) if not isinstance(b, int) else str(b) for b in bad[:20])
        raise InputError(
            f"{field}: not items step {step.number} had: {shown}. Step {step.number} had "
            f"items 1–{step.had_through_item}."
            if step.had_through_item
            else f"{field}: step {step.number} had no inventory items, so name none; got {shown}.",
            payload={"field": field, "invalid_ids": bad[:100]},
        )
    return sorted(set(ids))


def judgment_record(
    *,
    step: AuditStep,
    actor,
    judge_kind: str,
    judge_label: str = "",
    active_item_ids,
    helpful_item_ids=(),
    verbatim_needed: bool,
    counterfactual: str,
    confidence: str,
    note: str = "",
) -> Judgment:
    """Record (or replace) one judge's answer on a step. A person judges as themself; an LLM
    judge's answer is posted under its label."""
    audit = step.packet.audit
    workspace = audit.workspace
    _require_role(workspace, actor, JUDGE_ROLE, "Judging a step")
    if audit.status != AuditStatus.OPEN:
        raise InputError(f"The audit is {audit.get_status_display()}: it takes no judgments.")
    if judge_kind not in JudgeKind.values:
        raise InputError(f"judge_kind: use one of {', '.join(JudgeKind.values)}.")
    if judge_kind == JudgeKind.HUMAN:
        judge_label = actor.get_username()
    judge_label = (judge_label or "").strip()
    if not judge_label:
        raise InputError("judge_label: name the LLM judge (model and prompt version).")
    if counterfactual not in COUNTERFACTUALS:
        raise InputError(f"counterfactual: use one of {', '.join(COUNTERFACTUALS)}.")
    if confidence not in CONFIDENCES:
        raise InputError(f"confidence: use one of {', '.join(CONFIDENCES)}.")
    if not isinstance(verbatim_needed, bool):
        raise InputError("verbatim_needed: true or false.")
    if len(note or "") > MAX_NOTE:
        raise InputError(f"note: at most {MAX_NOTE:,} characters.")
    active = _item_ids("active_item_ids", active_item_ids, step)
    helpful = _item_ids("helpful_item_ids", list(helpful_item_ids or []), step)
    with transaction.atomic():
        judgment, created = Judgment.objects.update_or_create(
            step=step,
            judge_kind=judge_kind,
            judge_label=judge_label[:200],
            defaults={
                "workspace": workspace,
                "user": actor,
                "active_item_ids": active,
                "helpful_item_ids": helpful,
                "verbatim_needed": verbatim_needed,
                "counterfactual": counterfactual,
                "confidence": confidence,
                "note": (note or "").strip(),
            },
        )
        audit_record(
            workspace=workspace,
            actor=actor,
            action="audit.judge" if created else "audit.rejudge",
            obj=judgment,
            data={"audit": audit.pk, "step": step.pk, "judge": judgment.judge_label},
        )
    judgment.created = created
    return judgment


def audit_set_status(*, audit: Audit, actor, status: str) -> Audit:
    _require_role(audit.workspace, actor, CREATE_ROLE, "Opening or closing an audit")
    if status not in {AuditStatus.OPEN, AuditStatus.CLOSED}:
        raise InputError("status: open or closed.")
    if audit.status in {AuditStatus.BUILDING, AuditStatus.FAILED}:
        raise InputError(f"The audit is {audit.get_status_display()}; it cannot be {status}.")
    with transaction.atomic():
        audit.status = status
        audit.save(update_fields=["status"])
        audit_record(workspace=audit.workspace, actor=actor, action=f"audit.{status}", obj=audit)
    return audit
