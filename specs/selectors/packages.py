"""Reads for restart packages: lists, one package, the builder's prefill and the export."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.db.models import Count, Prefetch, QuerySet
from django.http import Http404
from django.urls import reverse

from governance.models import Workspace
from specs.formats import restart
from specs.models import (
    RestartPackage,
    SpecVersion,
    Verification,
    VersionStatus,
)
from specs.selectors.links import trace_session_for
from specs.selectors.versions import current_of, version_get, version_items, versions_for


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
    slug = package.workspace.slug
    spec = _pinned_spec(version, slug, absolute)
    verifications = tuple(
        _exported_verification(package, v, absolute, include_output)
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


def _pinned_spec(
    version: SpecVersion, slug: str, absolute: Callable[[str], str]
) -> restart.PinnedSpec:
    """The version a package pins, and the one now authoritative when that is another."""
    current = current_of(version=version)
    newer = current if current and current.pk != version.pk else None
    return restart.PinnedSpec(
        title=version.spec.title,
        slug=version.spec.slug,
        version_id=version.pk,
        number=version.number,
        fingerprint=version.fingerprint,
        status=version.status,
        items=tuple(version_items(version=version)),
        url=absolute(reverse("specs:version_detail", args=[slug, version.pk])),
        current_number=newer.number if newer else None,
        current_id=newer.pk if newer else None,
        current_fingerprint=newer.fingerprint if newer else "",
    )


def _exported_verification(
    package: RestartPackage, v: Verification, absolute: Callable[[str], str], include_output: bool
) -> restart.Verification:
    artifact_url = ""
    if v.artifact_id:
        artifact_url = absolute(
            reverse("artifacts:detail", args=[package.workspace.slug, v.artifact_id])
        )
    return restart.Verification(
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
            artifact_url=artifact_url,
            redactions=v.artifact.redaction_count if v.artifact_id else 0,
        ),
    )


def _session_path(workspace_slug: str, pk: int) -> str:
    """The trace viewer's page for a session, once the traces app routes one."""
    from django.urls import NoReverseMatch

    try:
        return reverse("traces:session_detail", args=[workspace_slug, pk])
    except NoReverseMatch:
        return ""
