"""Repository listings, command verifications and drift checks against a listing."""

from __future__ import annotations

import hashlib

from django.db import transaction
from django.utils import timezone

from governance.services import InputError, audit_record, job_create, job_enqueue
from qualification.contextfiles import selectors
from qualification.contextfiles.analysis import drift
from qualification.contextfiles.analysis.parsing import parse_context_file
from qualification.contextfiles.formats.listing import ListingError, read_listing
from qualification.contextfiles.models import (
    CommandVerification,
    ContextFile,
    ContextFileRevision,
    DriftCheck,
    DriftFinding,
    RepositoryListing,
)

MAX_LISTING_BYTES = 100 * 1024 * 1024
MAX_OUTPUT_CHARS = 10_000


def listing_upload(*, workspace, repository: str, data: bytes, label: str = "", actor=None):
    """Store the paths of a repository from a file list or tarball. Same bytes: same listing."""
    repository = repository.strip()
    if not repository:
        raise InputError("repository: name the repository this listing is of")
    if not data:
        raise InputError("file: the listing is empty")
    if len(data) > MAX_LISTING_BYTES:
        raise InputError(f"file: larger than {MAX_LISTING_BYTES // 1024**2} MiB")
    digest = hashlib.sha256(data).hexdigest()
    existing = RepositoryListing.objects.filter(
        workspace=workspace, repository=repository, content_hash=digest
    ).first()
    if existing is not None:
        return existing
    try:
        listing = read_listing(data)
    except ListingError as exc:
        raise InputError(f"file: {exc}") from None
    with transaction.atomic():
        record = RepositoryListing.objects.create(
            workspace=workspace,
            repository=repository,
            label=label.strip()[:200],
            source_format=listing.source_format,
            content_hash=digest,
            path_count=len(listing.paths),
            paths="\n".join(sorted(listing.paths)),
            hashes=listing.hashes,
            stripped_root=listing.stripped_root,
            skipped=listing.skipped,
            skipped_count=listing.skipped_count,
            uploaded_by=actor if getattr(actor, "pk", None) else None,
        )
        audit_record(
            workspace=workspace, actor=actor, action="repository_listing.upload", obj=record,
            data={"paths": record.path_count, "format": record.source_format,
                  "skipped": record.skipped_count},
        )  # fmt: skip
    return record


def command_verification_record(
    *,
    context_file: ContextFile,
    command: str,
    passed: bool,
    exit_code: int | None = None,
    repository_revision: str = "",
    output: str = "",
    actor=None,
    via: str = "web",
) -> CommandVerification:
    command = drift.normalise_command(command or "")
    if not command:
        raise InputError("command: name the command that was run")
    if len(command) > 500:
        raise InputError("command: at most 500 characters")
    if exit_code is not None and passed != (exit_code == 0):
        raise InputError(
            f"exit_code: {exit_code} contradicts passed={passed}; a command passes when it "
            "exits with 0"
        )
    with transaction.atomic():
        record = CommandVerification.objects.create(
            workspace=context_file.workspace,
            context_file=context_file,
            command=command,
            passed=passed,
            exit_code=exit_code,
            repository_revision=repository_revision.strip()[:100],
            output=(output or "")[:MAX_OUTPUT_CHARS],
            verified_by=actor if getattr(actor, "pk", None) else None,
            verified_at=timezone.now(),
            via=via,
        )
        audit_record(
            workspace=context_file.workspace, actor=actor, action="command_verification.record",
            obj=record, data={"command": command, "passed": passed, "exit_code": exit_code},
        )  # fmt: skip
    return record


# --- drift checks ----------------------------------------------------------------


def drift_check_start(*, revision: ContextFileRevision, listing=None, actor=None) -> DriftCheck:
    """Create a drift check and its job; the task runs once the transaction commits."""
    if listing is not None and listing.workspace_id != revision.workspace_id:
        raise InputError("listing: no such listing in this workspace")
    with transaction.atomic():
        check = DriftCheck.objects.create(
            workspace=revision.workspace,
            revision=revision,
            listing=listing,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        job = job_create(
            workspace=revision.workspace,
            kind="context_file_drift_check",
            user=actor,
            label=f"Drift checks: {revision}",
            params={"drift_check_id": check.pk},
            progress_total=len(drift.CHECKS),
            progress_unit="checks",
        )
        check.job = job
        check.save(update_fields=["job"])
        audit_record(
            workspace=revision.workspace, actor=actor, action="drift_check.start", obj=check,
            data={"revision": revision.revision, "listing": listing.pk if listing else None},
        )  # fmt: skip
        job_enqueue(job=job, task="contextfiles.drift_check")
    return check


def drift_check_run(job, reporter) -> None:
    """The job's work: run each check, then store the findings in one transaction."""
    check = (
        DriftCheck.objects.select_related("revision__context_file", "listing")
        .filter(pk=job.params.get("drift_check_id"), workspace=job.workspace)
        .first()
    )
    if check is None:
        raise InputError("the drift check this job was for no longer exists")
    if check.finished_at is not None:
        return
    revision = check.revision
    parsed = parse_context_file(revision.text)
    listing = selectors.listing_as_data(check.listing) if check.listing else None
    commands = drift.named_commands(parsed)
    verifications = selectors.latest_verifications(context_file=revision.context_file)
    today = timezone.localdate()
    steps = {
        "counts": lambda: drift.check_counts(parsed, listing),
        "paths": lambda: drift.check_paths(parsed, listing),
        "commands": lambda: drift.check_commands(commands, verifications, today=today),
        "generated": lambda: drift.check_generated(parsed, listing),
        "contradictions": lambda: drift.check_contradictions(parsed),
        "duplicates": lambda: drift.check_duplicates(parsed),
    }
    findings: list[drift.Finding] = []
    for name in drift.CHECKS:
        found = steps[name]()
        findings.extend(found)
        reporter.count(**{name: len(found)})
        reporter.advance()
    by_position = {i.position: i.pk for i in revision.instructions.only("pk", "position")}
    counts: dict[str, dict[str, int]] = {}
    for finding in findings:
        counts.setdefault(finding.check, {}).setdefault(finding.severity, 0)
        counts[finding.check][finding.severity] += 1
    with transaction.atomic():
        check = DriftCheck.objects.select_for_update().get(pk=check.pk)
        if check.finished_at is not None:
            return
        check.findings.all().delete()
        DriftFinding.objects.bulk_create(
            DriftFinding(
                workspace=check.workspace,
                drift_check=check,
                instruction_id=by_position.get(f.position),
                check_name=f.check,
                severity=f.severity,
                line=f.line,
                message=f.message,
                data=f.data,
            )
            for f in findings
        )
        check.counts = counts
        check.commands = [
            {"command": c.command, "line": c.line, "position": c.position} for c in commands
        ]
        check.finished_at = timezone.now()
        check.save(update_fields=["counts", "commands", "finished_at"])
    reporter.set_counts(findings=len(findings), commands=len(commands))
