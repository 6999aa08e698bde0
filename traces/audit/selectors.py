"""Reads of the utility audit, scoped by workspace (another workspace's audit is a 404)."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
from django.db.models import Count, Q, QuerySet
from django.http import Http404

from governance.models import Workspace
from traces.audit.analysis import fractions, sampling
from traces.audit.models import Audit, AuditPacket, AuditStep, JudgeKind, Judgment
from traces.audit.services import packet_decompress, run_infos
from traces.models import TaskType


def audits_for(*, workspace: Workspace) -> QuerySet[Audit]:
    return Audit.objects.filter(workspace=workspace).select_related("created_by", "job")


def audit_get(*, workspace: Workspace, pk) -> Audit:
    audit = audits_for(workspace=workspace).filter(pk=pk).first()
    if audit is None:
        raise Http404("No such audit in this workspace.")
    return audit


def step_get(*, audit: Audit, pk) -> AuditStep:
    step = AuditStep.objects.filter(packet__audit=audit, pk=pk).select_related("packet").first()
    if step is None:
        raise Http404("No such step in this audit.")
    step.packet.audit = audit
    return step


def strata_table(
    *, workspace: Workspace, edges=sampling.DEFAULT_BAND_EDGES, exclude_forks: bool = True
) -> dict:
    """Steps available per task type × band of the step's own window, for the create page and
    the API: `counts` the steps a stratum can give (at most three per run), `steps` all its
    steps, `runs` the runs with a step in it."""
    available = sampling.strata_availability(
        run_infos(workspace=workspace, exclude_forks=exclude_forks), edges
    )
    counts = {key: a.drawable for key, a in available.items()}
    bands = sampling.band_labels(edges)
    tasks = [t for t in TaskType.values if any(counts.get(f"{t}|{b}") for b in bands)]

    def cell(task: str, band: str) -> dict:
        key = f"{task}|{band}"
        found = available.get(key, sampling.StratumAvailability(0, 0, 0))
        return {
            "key": key, "band": band, "drawable": found.drawable, "steps": found.steps,
            "runs": found.runs,
        }  # fmt: skip

    return {
        "bands": bands,
        "task_types": tasks,
        "labels": dict(TaskType.choices),
        "counts": counts,
        "steps": {key: a.steps for key, a in available.items()},
        "runs": {key: a.runs for key, a in available.items()},
        "exclude_forks": exclude_forks,
        "rows": [
            {"task_type": t, "label": TaskType(t).label, "cells": [cell(t, b) for b in bands]}
            for t in tasks
        ],
        "total": sum(counts.values()),
    }


def audit_progress(*, audit: Audit) -> dict:
    steps = AuditStep.objects.filter(packet__audit=audit).annotate(
        human=Count("judgments", filter=Q(judgments__judge_kind=JudgeKind.HUMAN)),
        llm=Count("judgments", filter=Q(judgments__judge_kind=JudgeKind.LLM)),
    )
    total = judged = two = 0
    for step in steps.values("human", "llm"):
        total += 1
        judged += bool(step["human"] or step["llm"])
        two += (step["human"] + step["llm"]) >= 2
    return {"steps": total, "judged": judged, "judged_twice": two}


def packet_dict(packet: AuditPacket) -> dict:
    """The packet as a judge receives it, with the database ids of its steps."""
    data = packet_decompress(packet.data)
    ids = dict(AuditStep.objects.filter(packet=packet).values_list("number", "id"))
    for step in data["steps"]:
        step["step_id"] = ids.get(step["number"])
    data["packet_id"] = packet.pk
    data["position"] = packet.position
    data["audit_id"] = packet.audit_id
    data["counterfactual_question"] = fractions.COUNTERFACTUAL_QUESTION
    data["counterfactual_classes"] = list(fractions.COUNTERFACTUALS)
    return data


def packets_of(*, audit: Audit) -> QuerySet[AuditPacket]:
    return AuditPacket.objects.filter(audit=audit).select_related("run")


def packets_jsonl(*, audit: Audit) -> Iterator[bytes]:
    for packet in packets_of(audit=audit).iterator(chunk_size=20):
        yield orjson.dumps(packet_dict(packet)) + b"\n"


def judgments_of(*, audit: Audit) -> QuerySet[Judgment]:
    return (
        Judgment.objects.filter(step__packet__audit=audit)
        .select_related("step", "step__packet")
        .order_by("created_at", "id")
    )


def judgment_dict(judgment: Judgment) -> dict:
    step = judgment.step
    return {
        "id": judgment.pk,
        "audit_id": step.packet.audit_id,
        "packet_id": step.packet_id,
        "run_id": step.packet.run_id,
        "step_id": step.pk,
        "step_number": step.number,
        "call_index": step.call_index,
        "task_type": step.packet.task_type,
        "band": step.band,
        "window_tokens": step.window_tokens,
        "judge_kind": judgment.judge_kind,
        "judge_label": judgment.judge_label,
        "active_item_ids": judgment.active_item_ids,
        "helpful_item_ids": judgment.helpful_item_ids,
        "active_tokens": fractions.tokens_of(judgment.active_item_ids, step.packet.item_tokens),
        "helpful_tokens": fractions.tokens_of(judgment.helpful_item_ids, step.packet.item_tokens),
        "verbatim_needed": judgment.verbatim_needed,
        "counterfactual": judgment.counterfactual,
        "confidence": judgment.confidence,
        "note": judgment.note,
        "created_at": judgment.created_at.isoformat(),
        "updated_at": judgment.updated_at.isoformat(),
    }


def judgments_jsonl(*, audit: Audit) -> Iterator[bytes]:
    for judgment in judgments_of(audit=audit).iterator(chunk_size=500):
        yield orjson.dumps(judgment_dict(judgment)) + b"\n"


def next_step_for(*, audit: Audit, user) -> AuditStep | None:
    """The first step (by packet position, then number) this person has not judged."""
    mine = Judgment.objects.filter(
        step__packet__audit=audit, judge_kind=JudgeKind.HUMAN, user=user
    ).values("step_id")
    return (
        AuditStep.objects.filter(packet__audit=audit)
        .exclude(pk__in=mine)
        .select_related("packet")
        .order_by("packet__position", "number")
        .first()
    )


def audit_results(
    *, audit: Audit, judge_kind: str | None = None, min_confidence: str = "low"
) -> fractions.AuditResults:
    rows = judgments_of(audit=audit).values(
        "id", "judge_kind", "judge_label", "active_item_ids", "helpful_item_ids",
        "verbatim_needed", "counterfactual", "confidence", "step_id", "step__band",
        "step__window_tokens", "step__packet_id", "step__packet__task_type",
    )  # fmt: skip
    judged = []
    step_packet = {}
    for order, row in enumerate(rows):
        step_packet[row["step_id"]] = row["step__packet_id"]
        judged.append(
            fractions.JudgedStep(
                step_id=row["step_id"],
                judge=f"{row['judge_kind']}:{row['judge_label']}",
                judge_kind=row["judge_kind"],
                task_type=row["step__packet__task_type"],
                band=row["step__band"],
                window_tokens=row["step__window_tokens"],
                active_ids=frozenset(row["active_item_ids"]),
                helpful_ids=frozenset(row["helpful_item_ids"]),
                verbatim_needed=row["verbatim_needed"],
                counterfactual=row["counterfactual"],
                confidence=row["confidence"],
                order=order,
            )
        )
    item_tokens = dict(
        AuditPacket.objects.filter(pk__in=set(step_packet.values())).values_list(
            "id", "item_tokens"
        )
    )
    return fractions.audit_results(
        judged,
        item_tokens=item_tokens,
        step_packet=step_packet,
        band_order=sampling.band_labels(audit.band_edges or sampling.DEFAULT_BAND_EDGES),
        task_order=TaskType.values,
        judge_kind=judge_kind,
        min_confidence=min_confidence,
        seed=audit.seed,
    )
