"""Writes for restart packages: the pinned authoritative version, the handoff and the
instruction, with each verification's raw output kept verbatim."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import transaction

from governance.errors import InputError
from governance.models import Workspace
from governance.services import audit_record
from specs.analysis.content import normalize_text
from specs.formats.restart import INDICATORS, Discrepancy, Indicator, Instruction, Repository
from specs.inputs import VerificationInput
from specs.models import RestartPackage, Spec, SpecVersion, TextBlob, Verification, VersionStatus
from specs.services._common import StaleBase, _authoritative, _texts, fields_clean
from specs.validators import validate_output_size


def restart_package_create(
    *,
    workspace: Workspace,
    actor,
    spec_version: SpecVersion,
    repository: Repository,
    instruction: Instruction,
    completed_changes: Sequence[str] = (),
    changed_files: Sequence[str] = (),
    current_failures: Sequence[str] = (),
    verifications: Sequence[VerificationInput] = (),
    discrepancies: Sequence[Discrepancy] = (),
    indicators: Sequence[Indicator] = (),
    trace_session=None,
    title: str = "",
) -> RestartPackage:
    """Pin the authoritative version with the execution handoff and the starting instruction."""
    _check_package_input(
        workspace=workspace,
        repository=repository,
        instruction=instruction,
        verifications=verifications,
        indicators=indicators,
        trace_session=trace_session,
    )
    with transaction.atomic():
        spec = Spec.objects.select_for_update().get(pk=spec_version.spec_id)
        version = SpecVersion.objects.get(pk=spec_version.pk)
        if version.workspace_id != workspace.pk:
            raise InputError.for_fields({"spec_version": "No such version in this workspace."})
        if version.status == VersionStatus.SUPERSEDED:
            current = _authoritative(spec)
            raise StaleBase(
                f"v{version.number} of '{spec.title}' was superseded by v{current.number}; "
                f"a restart package pins the authoritative version (v{current.number}).",
                current=current,
            )
        if version.status != VersionStatus.AUTHORITATIVE:
            raise InputError.for_fields(
                {
                    "spec_version": f"v{version.number} of '{spec.title}' is "
                    f"{version.get_status_display()}; a restart package pins an authoritative "
                    "version."
                }
            )
        package = RestartPackage.objects.create(
            workspace=workspace,
            title=" ".join((title or "").split())[:200]
            or f"Restart from {spec.title} v{version.number}",
            spec_version=version,
            trace_session=trace_session,
            repository_remote=repository.remote.strip(),
            branch=repository.branch.strip(),
            commit=repository.commit.strip().lower(),
            completed_changes=_texts(completed_changes),
            changed_files=[path.strip() for path in changed_files if path.strip()],
            current_failures=_texts(current_failures),
            discrepancies=[
                {
                    "claim": normalize_text(d.claim),
                    "source": normalize_text(d.source),
                    "repository_state": normalize_text(d.repository_state),
                }
                for d in discrepancies
            ],
            authoritative_sources=_texts(instruction.authoritative_sources),
            next_action=normalize_text(instruction.next_action),
            indicators=[{"slug": i.slug, "note": normalize_text(i.note)} for i in indicators],
            created_by=actor,
        )
        for position, verification in enumerate(verifications):
            artifact, stored_text = _verification_artifact(
                workspace=workspace,
                package=package,
                position=position,
                verification=verification,
                actor=actor,
            )
            Verification.objects.create(
                workspace=workspace,
                package=package,
                position=position,
                command=verification.command.strip(),
                exit_status=verification.exit_status,
                commit=verification.commit.strip().lower(),
                ran_at=verification.ran_at,
                output=text_blob_store(workspace=workspace, content=stored_text),
                artifact=artifact,
            )
        audit_record(
            workspace=workspace,
            actor=actor,
            action="restart_package.create",
            obj=package,
            data={
                "spec": spec.slug,
                "version": version.number,
                "fingerprint": version.fingerprint,
                "commit": package.commit,
                "verifications": len(verifications),
                "indicators": [i.slug for i in indicators],
                "trace_session": getattr(trace_session, "pk", None),
            },
        )
    return package


def _verification_artifact(*, workspace, package, position: int, verification, actor):
    """Keep a verification's raw output in the artifact store (redacted there), and return
    the artifact with the exact text it stored, so the package's copy holds the same bytes."""
    from artifacts.services import artifact_write
    from artifacts.storage import blob_open

    raw = verification.output.encode()  # its size was checked with the package's input
    artifact = artifact_write(
        workspace=workspace,
        source=raw,
        run_id=f"restart-package-{package.pk}",
        tool_call_id=f"verification-{position + 1}",
        command=verification.command.strip()[:1000],
        exit_status=verification.exit_status,
        complete=True,
        finished_at=verification.ran_at,
        actor=actor,
    )
    with blob_open(artifact.storage_name) as handle:
        stored = handle.read().decode("utf-8", errors="replace")
    return artifact, stored


def text_blob_store(*, workspace: Workspace, content: str) -> TextBlob:
    """Keep raw text verbatim, once per workspace, under its sha256."""
    raw = content.encode()
    if errors := _output_errors(raw):
        raise InputError.for_fields(errors)
    digest = hashlib.sha256(raw).hexdigest()
    blob, _ = TextBlob.objects.get_or_create(
        workspace=workspace,
        sha256=digest,
        defaults={
            "size_bytes": len(raw),
            "line_count": content.count("\n") + (0 if content.endswith("\n") or not content else 1),
            "content": content,
        },
    )
    return blob


def _check_package_input(
    *, workspace, repository, instruction, verifications, indicators, trace_session
) -> None:
    """The package's input, checked before anything is locked; the first bad part is raised."""
    for indicator in indicators:
        if indicator.slug not in INDICATORS:
            raise InputError.for_fields({"indicators": f"Unknown indicator '{indicator.slug}'."})
        if indicator.slug == "other" and not normalize_text(indicator.note):
            raise InputError.for_fields(
                {"indicators": "Describe the 'other' indicator in its note."}
            )
    if not normalize_text(instruction.next_action):
        raise InputError.for_fields({"next_action": "State the next action."})
    if errors := fields_clean(RestartPackage(commit=repository.commit.strip()), ["commit"]):
        raise InputError.for_fields(errors)
    for verification in verifications:
        errors = fields_clean(Verification(commit=verification.commit.strip()), ["commit"])
        errors |= _output_errors(verification.output)
        if errors:
            raise InputError.for_fields(errors)
    if trace_session is not None and trace_session.workspace_id != workspace.pk:
        raise InputError.for_fields({"trace_session": "No such trace session in this workspace."})


def _output_errors(output: str | bytes) -> dict[str, list[str]]:
    try:
        validate_output_size(output)
    except ValidationError as exc:
        return {"output": exc.messages}
    return {}
