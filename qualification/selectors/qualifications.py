"""Reads of qualifications, their trials and uploads."""

from __future__ import annotations

import pandas as pd
from django.db.models import Count, Max, QuerySet
from django.http import Http404

from qualification.analysis.sweep import trials_frame
from qualification.models import (
    Qualification,
    Trial,
    TrialUpload,
)


def qualifications_for(*, workspace) -> QuerySet[Qualification]:
    return (
        Qualification.objects.filter(workspace=workspace)
        .select_related("configuration", "workload", "supersedes", "created_by")
        .annotate(trial_count=Count("trials"))
        .order_by("-created_at", "-id")
    )


def qualification_get(*, workspace, pk) -> Qualification:
    qualification = (
        Qualification.objects.filter(workspace=workspace, pk=pk)
        .select_related("configuration", "workload", "supersedes__configuration", "created_by")
        .first()
    )
    if qualification is None:
        raise Http404("No such qualification in this workspace.")
    return qualification


def trials_for(*, qualification: Qualification) -> QuerySet[Trial]:
    return Trial.objects.filter(
        workspace=qualification.workspace, qualification=qualification
    ).select_related("task__family", "session")


def uploads_for(*, qualification: Qualification) -> QuerySet[TrialUpload]:
    return TrialUpload.objects.filter(
        workspace=qualification.workspace, qualification=qualification
    ).select_related("job", "uploaded_by")


def trial_summary(*, qualification: Qualification) -> dict:
    trials = Trial.objects.filter(workspace=qualification.workspace, qualification=qualification)
    summary = trials.aggregate(
        trials=Count("id"),
        tasks=Count("task", distinct=True),
        strata=Count("stratum_tokens", distinct=True),
        max_repeat=Max("repeat"),
    )
    summary["families"] = list(
        trials.values("task__family__key")
        .annotate(trials=Count("id"), tasks=Count("task", distinct=True))
        .order_by("task__family__key")
    )
    return summary


def failure_classes(*, qualification: Qualification) -> list[dict]:
    """Failed trials by stratum and failure class ('' = not classified), all families."""
    return list(
        Trial.objects.filter(
            workspace=qualification.workspace, qualification=qualification, task_correct=False
        )
        .values("stratum_tokens", "failure_class")
        .annotate(n=Count("id"))
        .order_by("stratum_tokens", "failure_class")
    )


def trial_frame(*, qualification: Qualification) -> pd.DataFrame:
    """The columns analysis needs, straight from the database (no ORM objects)."""
    rows = Trial.objects.filter(
        workspace=qualification.workspace, qualification=qualification
    ).values_list(
        "task__family__key",
        "task__external_id",
        "stratum_tokens",
        "repeat",
        "task_correct",
        "retrieval_correct",
        "input_tokens",
        "output_tokens",
        "model_calls",
        "tool_calls",
        "cost_usd",
        "latency_ms",
    )
    return trials_frame(list(rows))
