"""Reads for artifacts, always scoped to a workspace and, for run-scoped tokens, to a run."""

from __future__ import annotations

import uuid

from django.db.models import Count, Max, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from artifacts.content.coverage import Coverage, merge_ranges
from artifacts.models import Artifact, ArtifactPolicy, ArtifactRead, ArtifactWriteFailure
from governance.models import Workspace

NOT_FOUND = "No such artifact in this workspace."


def artifacts_for(*, workspace: Workspace, run_scope: str = "") -> QuerySet[Artifact]:
    """Pointers and tombstones, newest first. A run scope hides every other run."""
    artifacts = (
        Artifact.objects.filter(workspace=workspace)
        .defer("line_index")
        .select_related("created_by", "created_by_token")
    )
    return artifacts.filter(run_id=run_scope) if run_scope else artifacts


def artifact_get(*, workspace: Workspace, pk, run_scope: str = "") -> Artifact:
    """One artifact by id; a malformed id, another workspace or another run is a 404."""
    try:
        artifact_id = uuid.UUID(str(pk))
    except (TypeError, ValueError, AttributeError):
        raise Http404(NOT_FOUND) from None
    artifacts = Artifact.objects.filter(workspace=workspace, pk=artifact_id)
    if run_scope:
        artifacts = artifacts.filter(run_id=run_scope)
    artifact = artifacts.select_related("created_by", "deleted_by").first()
    if artifact is None:
        raise Http404(NOT_FOUND)
    return artifact


def artifact_reads_for(*, artifact: Artifact) -> QuerySet[ArtifactRead]:
    return ArtifactRead.objects.filter(
        workspace_id=artifact.workspace_id, artifact=artifact
    ).select_related("actor", "token")


def artifact_coverage(*, artifact: Artifact) -> Coverage:
    """The union of every byte range any reader loaded."""
    ranges = []
    for read_ranges in artifact_reads_for(artifact=artifact).values_list("ranges", flat=True):
        ranges.extend((int(start), int(end)) for start, end in read_ranges or [])
    return merge_ranges(ranges, size=artifact.size_bytes)


def write_failures_for(*, workspace: Workspace, run_scope: str = "") -> QuerySet:
    failures = ArtifactWriteFailure.objects.filter(workspace=workspace).select_related(
        "actor", "token"
    )
    return failures.filter(run_id=run_scope) if run_scope else failures


def artifact_policy_peek(*, workspace: Workspace) -> ArtifactPolicy:
    """The workspace's policy, or the defaults (unsaved) if it has none yet."""
    return ArtifactPolicy.objects.filter(workspace=workspace).first() or ArtifactPolicy(
        workspace=workspace
    )


def artifact_runs(*, workspace: Workspace, limit: int = 200) -> list[dict]:
    """Runs with artifacts, most recent first: id, count, bytes."""
    return list(
        Artifact.objects.filter(workspace=workspace)
        .values("run_id")
        .annotate(count=Count("id"), bytes=Sum("size_bytes"), last=Max("created_at"))
        .order_by("-last")[:limit]
    )


def artifact_totals(*, workspace: Workspace) -> dict:
    return Artifact.objects.filter(
        workspace=workspace, state="available", expires_at__gt=timezone.now()
    ).aggregate(count=Count("id"), bytes=Sum("size_bytes"), tokens=Sum("estimated_tokens"))
