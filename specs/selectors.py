"""Reads for specifications, versions, reviews and restart packages, always scoped by workspace."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.http import Http404
from django.urls import reverse

from governance.errors import InputError
from governance.models import Workspace
from specs.analysis.content import Item, fingerprint
from specs.analysis.diff import VersionDiff, acknowledgement_keys, diff_items
from specs.formats import restart
from specs.formats.markdown import ExportHeader, Source, SpecDocument, render_markdown
from specs.inputs import SourceInput
from specs.models import (
    ItemAlternative,
    RestartPackage,
    SourceKind,
    Spec,
    SpecItem,
    SpecSource,
    SpecVersion,
    Verification,
    VersionStatus,
)
from traces.annotations.models import Divergence
from traces.models import Run, Session

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


# --- trace links -------------------------------------------------------------


def trace_session_for(*, workspace: Workspace, pk) -> Session | None:
    try:
        return Session.objects.for_workspace(workspace).filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        return None


def trace_sessions_matching(*, workspace: Workspace, text: str, limit: int = 20) -> list[Session]:
    """Sessions whose id starts with `text`, or whose title or project contains it, most
    recent first; with no text, the most recent ones."""
    sessions = Session.objects.for_workspace(workspace)
    text = (text or "").strip()
    if text:
        sessions = sessions.filter(
            Q(external_id__istartswith=text) | Q(title__icontains=text) | Q(project__icontains=text)
        )
    return list(sessions.order_by("-started_at", "-id")[:limit])


def trace_session_label(session: Session) -> str:
    """How a person recognises a session: its short id, title or project, and start."""
    what = session.title or session.project or "untitled"
    when = f", {session.started_at:%Y-%m-%d %H:%M}" if session.started_at else ""
    return f"{session.external_id[:8]} ({what}{when})"


def trace_session_resolve(*, workspace: Workspace, text: str) -> Session:
    """The one session `text` names: its whole id, else the only session whose id starts
    with it or whose title or project contains it. InputError says which when it is none
    or several."""
    text = (text or "").strip()
    exact = list(Session.objects.for_workspace(workspace).filter(external_id=text)[:2])
    if len(exact) == 1:
        return exact[0]
    shown = 5
    matches = trace_sessions_matching(workspace=workspace, text=text, limit=shown + 1)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InputError(
            f"No trace session in this workspace has an id starting with “{text}” or a title "
            "or project containing it."
        )
    count = f"more than {shown}" if len(matches) > shown else str(len(matches))
    listed = "; ".join(trace_session_label(session) for session in matches[:shown])
    raise InputError(
        f"“{text}” matches {count} trace sessions: {listed}. Type more of the id, or choose "
        "one from the suggestions."
    )


def trace_run_for(*, workspace: Workspace, pk) -> Run | None:
    try:
        return Run.objects.for_workspace(workspace).filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        return None


def divergence_for(*, workspace: Workspace, pk) -> Divergence | None:
    try:
        return Divergence.objects.for_workspace(workspace).filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        return None


def sources_from_tokens(*, workspace: Workspace, sources: Iterable[Source]) -> list[SourceInput]:
    """Resolve Markdown source tokens inside the workspace; unknown ids are input errors."""
    resolved, errors = [], []
    for source in sources:
        if source.kind == "url":
            resolved.append(SourceInput(SourceKind.REFERENCE, url=source.ref, label=source.label))
        elif source.kind == "trace_session":
            session = trace_session_for(workspace=workspace, pk=source.ref)
            if session is None:
                errors.append(f"{source.token}: no such trace session in this workspace.")
            else:
                resolved.append(
                    SourceInput(SourceKind.TRACE_SESSION, trace_session=session, label=source.label)
                )
        elif source.kind == "trace_run":
            run = trace_run_for(workspace=workspace, pk=source.ref)
            if run is None:
                errors.append(f"{source.token}: no such trace run in this workspace.")
            else:
                resolved.append(SourceInput(SourceKind.TRACE_RUN, run=run, label=source.label))
        elif source.kind == "trace_divergence":
            divergence = divergence_for(workspace=workspace, pk=source.ref)
            if divergence is None:
                errors.append(f"{source.token}: no such divergence mark in this workspace.")
            else:
                resolved.append(
                    SourceInput(SourceKind.DIVERGENCE, divergence=divergence, label=source.label)
                )
    if errors:
        raise InputError.for_fields({"sources": errors})
    return resolved


# --- restart packages ----------------------------------------------------------


def packages_for(*, workspace: Workspace) -> QuerySet[RestartPackage]:
    return (
        RestartPackage.objects.for_workspace(workspace)
        .select_related("spec_version__spec", "created_by", "trace_session")
        .annotate(verification_count=Count("verifications"))
        .order_by("-created_at", "-id")
    )


def authoritative_versions(*, workspace: Workspace) -> QuerySet[SpecVersion]:
    """The versions a restart package may hand off from, by specification title."""
    return (
        versions_for(workspace=workspace)
        .filter(status=VersionStatus.AUTHORITATIVE)
        .order_by("spec__title")
    )


@dataclass
class PackagePrefill:
    initial: dict
    notes: list[str] = field(default_factory=list)
    verification_rows: list[dict] | None = None  # set when copied from a package
    discrepancy_rows: list[dict] | None = None


def _number(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def restart_package_prefill(*, workspace: Workspace, params) -> PackagePrefill:
    """The builder's starting values from `?from_package=<id>`, `?spec_version=<id>`,
    `?session=<id>` and `?indicators=a,b`, with a note for each value that was not used.

    An unknown `from_package` is a 404; the other parameters are ignored with a note."""
    prefill = PackagePrefill(initial={})
    if params.get("from_package"):
        _prefill_from_package(prefill, workspace, params["from_package"])
    if params.get("spec_version"):
        _prefill_version(prefill, workspace, params["spec_version"])
    if prefill.initial.get("spec_version") and not prefill.initial.get("authoritative_sources"):
        version = (
            authoritative_versions(workspace=workspace)
            .filter(pk=_number(prefill.initial["spec_version"]))
            .first()
        )
        if version:
            prefill.initial["authoritative_sources"] = (
                f"Specification '{version.spec.title}' v{version.number} "
                f"(sha256:{version.fingerprint[:12]})\nThe repository at the handoff commit"
            )
    if params.get("session"):
        _prefill_session(prefill, workspace, params["session"])
    if params.get("indicators"):
        _prefill_indicators(prefill, params["indicators"])
    return prefill


def _prefill_from_package(prefill: PackagePrefill, workspace: Workspace, source) -> None:
    number = _number(source)
    if number is None:
        raise Http404("No such restart package.")
    package = package_get(workspace=workspace, pk=number)
    current = current_of(version=package.spec_version)
    prefill.initial.update(
        title=package.title,
        spec_version=str(current.pk) if current else "",
        trace_session=package.trace_session_id,
        remote=package.repository_remote,
        branch=package.branch,
        commit=package.commit,
        completed_changes="\n".join(package.completed_changes),
        changed_files="\n".join(package.changed_files),
        current_failures="\n".join(package.current_failures),
        authoritative_sources="\n".join(package.authoritative_sources),
        next_action=package.next_action,
        indicators=[i["slug"] for i in package.indicators],
        other_indicator=next((i["note"] for i in package.indicators if i["slug"] == "other"), ""),
    )
    prefill.verification_rows = [
        {
            "index": v.position,
            "command": v.command,
            "exit_status": v.exit_status,
            "commit": v.commit,
            "output": v.output.content,
            "errors": {},
        }
        for v in package.verifications.all()
    ]
    prefill.discrepancy_rows = [
        dict(d, index=i, errors={}) for i, d in enumerate(package.discrepancies)
    ]
    prefill.notes.append(
        f"Copied from package #{package.pk}; the specification is set to the current "
        "authoritative version."
    )


def _prefill_version(prefill: PackagePrefill, workspace: Workspace, version_id) -> None:
    version = authoritative_versions(workspace=workspace).filter(pk=_number(version_id)).first()
    if version is None:
        prefill.notes.append(
            f"Version {version_id} is not an authoritative version in this workspace; "
            "choose one below."
        )
    else:
        prefill.initial["spec_version"] = str(version.pk)


def _prefill_session(prefill: PackagePrefill, workspace: Workspace, session_id) -> None:
    session = trace_session_for(workspace=workspace, pk=session_id)
    if session is None:
        prefill.notes.append(
            f"Trace session {session_id} is not in this workspace; it was not linked."
        )
        return
    prefill.initial["trace_session"] = session.pk
    prefill.initial.setdefault("branch", session.git_branch)
    if not prefill.initial.get("title"):
        prefill.initial["title"] = f"Restart of {session.title or session}"[:200]


def _prefill_indicators(prefill: PackagePrefill, value: str) -> None:
    slugs = [slug.strip() for slug in value.split(",") if slug.strip()]
    unknown = [slug for slug in slugs if slug not in restart.INDICATORS]
    if unknown:
        prefill.notes.append(
            f"Unknown indicator{'s' if len(unknown) > 1 else ''} ignored: {', '.join(unknown)}."
        )
    prefill.initial["indicators"] = [slug for slug in slugs if slug in restart.INDICATORS]


def package_get(*, workspace: Workspace, pk: int) -> RestartPackage:
    package = (
        packages_for(workspace=workspace)
        .prefetch_related(
            Prefetch(
                "verifications",
                queryset=Verification.objects.select_related("output").order_by("position"),
            )
        )
        .filter(pk=pk)
        .first()
    )
    if package is None:
        raise Http404("No such restart package in this workspace.")
    return package


def verification_get(*, package: RestartPackage, position: int) -> Verification:
    verification = (
        Verification.objects.filter(package=package, position=position)
        .select_related("output")
        .first()
    )
    if verification is None:
        raise Http404("No such verification in this package.")
    return verification


def package_export(
    *,
    package: RestartPackage,
    absolute: Callable[[str], str] = lambda path: path,
    include_output: bool = False,
) -> restart.PackageExport:
    """The package as plain data for the JSON and Markdown exports."""
    version = version_get(workspace=package.workspace, pk=package.spec_version_id)
    current = current_of(version=version)
    slug = package.workspace.slug
    spec = restart.PinnedSpec(
        title=version.spec.title,
        slug=version.spec.slug,
        version_id=version.pk,
        number=version.number,
        fingerprint=version.fingerprint,
        status=version.status,
        items=tuple(version_items(version=version)),
        url=absolute(reverse("specs:version_detail", args=[slug, version.pk])),
        current_number=current.number if current and current.pk != version.pk else None,
        current_id=current.pk if current and current.pk != version.pk else None,
        current_fingerprint=current.fingerprint if current and current.pk != version.pk else "",
    )
    verifications = tuple(
        restart.Verification(
            command=v.command,
            exit_status=v.exit_status,
            commit=v.commit,
            ran_at=v.ran_at.isoformat() if v.ran_at else None,
            output=restart.OutputPointer(
                sha256=v.output.sha256,
                size_bytes=v.output.size_bytes,
                line_count=v.output.line_count,
                url=absolute(reverse("restart-package-output", args=[package.pk, v.position])),
                tail=restart.tail_of(v.output.content),
                content=v.output.content if include_output else None,
                artifact_id=str(v.artifact_id) if v.artifact_id else None,
                artifact_url=absolute(
                    reverse("artifacts:detail", args=[package.workspace.slug, v.artifact_id])
                )
                if v.artifact_id
                else "",
                redactions=v.artifact.redaction_count if v.artifact_id else 0,
            ),
        )
        for v in package.verifications.all()
    )
    handoff = restart.Handoff(
        repository=restart.Repository(
            commit=package.commit, remote=package.repository_remote, branch=package.branch
        ),
        completed_changes=tuple(package.completed_changes),
        changed_files=tuple(package.changed_files),
        current_failures=tuple(package.current_failures),
        verifications=verifications,
        discrepancies=tuple(
            restart.Discrepancy(
                claim=d.get("claim", ""),
                repository_state=d.get("repository_state", ""),
                source=d.get("source", ""),
            )
            for d in package.discrepancies
        ),
    )
    session = package.trace_session
    return restart.PackageExport(
        id=package.pk,
        title=package.title,
        created_at=package.created_at.isoformat(timespec="seconds"),
        created_by=package.created_by.get_username() if package.created_by else "",
        spec=spec,
        handoff=handoff,
        instruction=restart.Instruction(
            next_action=package.next_action,
            authoritative_sources=tuple(package.authoritative_sources),
        ),
        indicators=tuple(
            restart.Indicator(slug=i.get("slug", ""), note=i.get("note", ""))
            for i in package.indicators
        ),
        trace_session=(
            restart.TraceSessionRef(
                id=session.pk,
                label=session.title or str(session),
                url=absolute(_session_path(slug, session.pk)),
            )
            if session
            else None
        ),
        url=absolute(reverse("specs:package_detail", args=[slug, package.pk])),
    )


def _session_path(workspace_slug: str, pk: int) -> str:
    """The trace viewer's page for a session, once the traces app routes one."""
    from django.urls import NoReverseMatch

    try:
        return reverse("traces:session_detail", args=[workspace_slug, pk])
    except NoReverseMatch:
        return ""
