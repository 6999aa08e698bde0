"""Reads of assembly audits."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet
from django.http import Http404

from qualification.models import (
    AssemblyAudit,
)


def audits_for(*, workspace) -> QuerySet[AssemblyAudit]:
    return AssemblyAudit.objects.filter(workspace=workspace).select_related(
        "operating_limit", "created_by"
    )


def audit_get(*, workspace, pk) -> AssemblyAudit:
    audit = audits_for(workspace=workspace).filter(pk=pk).first()
    if audit is None:
        raise Http404("No such budget check in this workspace.")
    return audit


def audit_counts(*, workspace) -> dict:
    return AssemblyAudit.objects.filter(workspace=workspace).aggregate(
        total=Count("id"), over=Count("id", filter=Q(verdict="over"))
    )


# --- for other areas: the lab's view of a model ---------------------------------------------
