"""Reads for specifications and their versions: lists, one version, diffs, exports."""

from __future__ import annotations

from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.http import Http404

from governance.errors import InputError
from governance.models import Workspace
from specs.analysis.content import Item, fingerprint
from specs.analysis.diff import VersionDiff, acknowledgement_keys, diff_items
from specs.formats.markdown import ExportHeader, Source, SpecDocument, render_markdown
from specs.models import (
    ItemAlternative,
    SourceKind,
    Spec,
    SpecItem,
    SpecSource,
    SpecVersion,
    VersionStatus,
)

ITEMS_PREFETCH = Prefetch(
    "items",
    queryset=SpecItem.objects.order_by("position").prefetch_related(
        Prefetch("alternatives", queryset=ItemAlternative.objects.order_by("position"))
    ),
)


# --- specs -------------------------------------------------------------------


def specs_for(*, workspace: Workspace) -> QuerySet[Spec]:
    """Specs with their authoritative version's number and fingerprint, and pending reviews."""
    authoritative = SpecVersion.objects.filter(
        spec=OuterRef("pk"), status=VersionStatus.AUTHORITATIVE
    )
    return (
        Spec.objects.for_workspace(workspace)
        .select_related("owner")
        .annotate(
            authoritative_number=Subquery(authoritative.values("number")[:1]),
            authoritative_id=Subquery(authoritative.values("pk")[:1]),
            authoritative_fingerprint=Subquery(authoritative.values("fingerprint")[:1]),
            authoritative_at=Subquery(authoritative.values("decided_at")[:1]),
            version_count=Count("versions", distinct=True),
            in_review_count=Count(
                "versions", filter=Q(versions__status=VersionStatus.IN_REVIEW), distinct=True
            ),
            draft_count=Count(
                "versions", filter=Q(versions__status=VersionStatus.DRAFT), distinct=True
            ),
        )
        .order_by("title", "id")
    )


def spec_get(*, workspace: Workspace, slug: str | None = None, pk: int | None = None) -> Spec:
    specs = specs_for(workspace=workspace)
    spec = specs.filter(slug=slug).first() if slug is not None else specs.filter(pk=pk).first()
    if spec is None:
        raise Http404("No such specification in this workspace.")
    return spec


def authoritative_version(*, spec: Spec) -> SpecVersion | None:
    return (
        SpecVersion.objects.filter(spec=spec, status=VersionStatus.AUTHORITATIVE)
        .select_related("author", "reviewer", "submitted_by")
        .prefetch_related(ITEMS_PREFETCH)
        .first()
    )


def open_question_count(*, version: SpecVersion | None) -> int:
    if version is None:
        return 0
    return sum(1 for item in version.items.all() if item.is_unresolved)


# --- versions ----------------------------------------------------------------


def versions_for(*, workspace: Workspace) -> QuerySet[SpecVersion]:
    return SpecVersion.objects.for_workspace(workspace).select_related(
        "spec", "author", "reviewer", "submitted_by", "supersedes"
    )


def versions_of(*, spec: Spec) -> QuerySet[SpecVersion]:
    return (
        versions_for(workspace=spec.workspace)
        .filter(spec=spec)
        .annotate(item_count=Count("items"))
        .order_by("-number")
    )


def version_get(*, workspace: Workspace, pk: int) -> SpecVersion:
    version = (
        versions_for(workspace=workspace)
        .prefetch_related(
            ITEMS_PREFETCH, "sources__trace_session", "sources__run", "sources__divergence"
        )
        .filter(pk=pk)
        .first()
    )
    if version is None:
        raise Http404("No such specification version in this workspace.")
    return version


def version_items(*, version: SpecVersion | None) -> list[Item]:
    """The version's items as plain data, reusing prefetched rows when there are some."""
    if version is None:
        return []
    if "items" in getattr(version, "_prefetched_objects_cache", {}):
        rows = version.items.all()
    else:
        rows = version.items.order_by("position").prefetch_related("alternatives")
    return [row.as_content() for row in rows]


def fingerprint_verified(*, version: SpecVersion) -> bool:
    """True when the stored items still hash to the stored fingerprint."""
    return fingerprint(version_items(version=version)) == version.fingerprint


def current_of(*, version: SpecVersion) -> SpecVersion | None:
    """The spec's authoritative version now (which may be `version` itself)."""
    return SpecVersion.objects.filter(
        spec_id=version.spec_id, status=VersionStatus.AUTHORITATIVE
    ).first()


def successor_of(*, version: SpecVersion) -> SpecVersion | None:
    """The accepted version that superseded this one, if any."""
    return (
        version.successors.filter(status__in=VersionStatus.accepted())
        .select_related("reviewer")
        .first()
    )


def is_stale(*, version: SpecVersion, current: SpecVersion | None) -> bool:
    """A draft or version in review whose base is no longer the authoritative version."""
    if version.status not in (VersionStatus.DRAFT, VersionStatus.IN_REVIEW):
        return False
    return version.supersedes_id != (current.pk if current else None)


def version_diff(*, version: SpecVersion, against: SpecVersion | None) -> VersionDiff:
    return diff_items(version_items(version=against), version_items(version=version))


def comparison_base(
    *, version: SpecVersion, against_id: str | int | None = None
) -> SpecVersion | None:
    """The version to compare with: `against_id` (same spec), else what it supersedes."""
    if against_id in (None, ""):
        if version.supersedes_id is None:
            return None
        return version_get(workspace=version.workspace, pk=version.supersedes_id)
    try:
        pk = int(against_id)
    except (TypeError, ValueError):
        raise InputError.for_fields({"against": "Give a version id."}) from None
    other = versions_for(workspace=version.workspace).filter(pk=pk, spec_id=version.spec_id)
    if not other.exists():
        raise Http404(f"No version {pk} in specification '{version.spec.slug}'.")
    return version_get(workspace=version.workspace, pk=pk)


def pending_resolutions(*, version: SpecVersion) -> list[dict]:
    """Open questions this version settles or removes, then settled items it omits, against
    the version it supersedes: what a decision must acknowledge.

    Each entry has the key, its `category` ("resolved" or "omitted"), the item as it stood
    and what replaced it (or None).
    """
    base = (
        version_get(workspace=version.workspace, pk=version.supersedes_id)
        if version.supersedes_id
        else None
    )
    before = {item.key: item for item in version_items(version=base)}
    after = {item.key: item for item in version_items(version=version)}
    needed = acknowledgement_keys(list(before.values()), list(after.values()))
    return [
        {"key": key, "category": category, "before": before[key], "after": after.get(key)}
        for category, keys in needed.items()
        for key in keys
    ]


def review_queue(*, workspace: Workspace) -> QuerySet[SpecVersion]:
    """Versions waiting for a reviewer, oldest submission first."""
    return (
        versions_for(workspace=workspace)
        .filter(status=VersionStatus.IN_REVIEW)
        .annotate(item_count=Count("items"))
        .order_by("submitted_at", "pk")
    )


def version_markdown(*, version: SpecVersion) -> str:
    items = version_items(version=version)
    document = SpecDocument(
        title=version.spec.title, items=tuple(items), sources=tuple(version_sources(version))
    )
    header = ExportHeader(
        slug=version.spec.slug,
        number=version.number,
        status=version.status,
        supersedes_number=version.supersedes.number if version.supersedes_id else None,
    )
    return render_markdown(document, header)


def version_json(*, version: SpecVersion) -> dict:
    items = version_items(version=version)
    return {
        "format": "context-governance/spec-version@1",
        "spec": {"id": version.spec_id, "slug": version.spec.slug, "title": version.spec.title},
        "id": version.pk,
        "number": version.number,
        "status": version.status,
        "supersedes": version.supersedes.number if version.supersedes_id else None,
        "fingerprint": f"sha256:{version.fingerprint}",
        "items": [item.as_dict() for item in items],
        "sources": [
            {"kind": s.kind, "ref": s.ref, "label": s.label} for s in version_sources(version)
        ],
    }


def version_sources(version: SpecVersion) -> list[Source]:
    """The version's sources as Markdown-ready plain data."""
    sources = []
    for source in version.sources.all():
        if source.kind == SourceKind.REFERENCE:
            sources.append(Source("url", source.url, source.label))
        elif source.kind == SourceKind.TRACE_SESSION and source.trace_session_id:
            label = _given_label(source, source.trace_session)
            sources.append(Source("trace_session", str(source.trace_session_id), label))
        elif source.kind == SourceKind.TRACE_RUN and source.run_id:
            label = _given_label(source, source.run)
            sources.append(Source("trace_run", str(source.run_id), label))
        elif source.kind == SourceKind.DIVERGENCE and source.divergence_id:
            label = _given_label(source, source.divergence)
            sources.append(Source("trace_divergence", str(source.divergence_id), label))
    return sources


def _given_label(source: SpecSource, linked) -> str:
    """The label a person gave; not the object's own name, which is stored only so that the
    source still reads when the object is deleted."""
    return "" if source.label == str(linked)[:300] else source.label
