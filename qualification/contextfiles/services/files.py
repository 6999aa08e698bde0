"""Context files and their revisions: imports, and review settings."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from governance.services import InputError, audit_record
from qualification.contextfiles import selectors
from qualification.contextfiles.analysis.diff import ChangeKind, diff_instructions
from qualification.contextfiles.analysis.parsing import content_hash, parse_context_file
from qualification.contextfiles.models import (
    ContextFile,
    ContextFileRevision,
    DriftCheck,
    Instruction,
)
from qualification.contextfiles.services.ledger import CARRIED_FIELDS
from qualification.contextfiles.services.listings import drift_check_start

MAX_FILE_BYTES = 512 * 1024


@dataclass
class ImportResult:
    context_file: ContextFile
    revision: ContextFileRevision
    created: bool
    drift_check: DriftCheck | None = None


def context_file_import(
    *, workspace, repository: str, path: str, text: str, revision: str = "", actor=None
) -> ImportResult:
    """Import one revision of a file: parse it, diff it against the last, carry the ledger forward.

    Re-importing the same revision with the same text returns it unchanged.
    """
    repository, path, revision = repository.strip(), path.strip(), (revision or "").strip()
    text = _clean_import(repository=repository, path=path, text=text, revision=revision)
    digest = content_hash(text)
    revision = revision or f"sha256:{digest[:12]}"
    with transaction.atomic():
        context_file = _context_file_locked(
            workspace=workspace, repository=repository, path=path, actor=actor
        )
        existing = context_file.revisions.filter(revision=revision).first()
        if existing is not None:
            if existing.content_hash == digest:
                return ImportResult(context_file, existing, created=False)
            raise InputError(
                f"revision: {revision} of {context_file} was already imported with different "
                "text; give the new text its own revision (commit or content hash)"
            )
        new_revision, rows = _revision_create(
            context_file, text=text, revision=revision, digest=digest, actor=actor
        )
        audit_record(
            workspace=workspace,
            actor=actor,
            action="context_file.import_revision",
            obj=new_revision,
            data={
                "revision": revision,
                "number": new_revision.number,
                "instructions": len(rows),
                "diff": new_revision.diff_counts,
            },
        )
        listing = selectors.latest_listing(workspace=workspace, repository=repository)
        check = drift_check_start(revision=new_revision, listing=listing, actor=actor)
    return ImportResult(context_file, new_revision, created=True, drift_check=check)


def _clean_import(*, repository: str, path: str, text: str, revision: str) -> str:
    """The checks on what is imported; the text with its line ends made `\\n`."""
    if not repository:
        raise InputError("repository: name the repository the file belongs to")
    if not path:
        raise InputError("path: give the file's path in the repository, e.g. AGENTS.md")
    if len(repository) > 300 or len(path) > 300 or len(revision) > 100:
        raise InputError("repository and path may be 300 characters, revision 100")
    if not text or not text.strip():
        raise InputError("text: the file is empty")
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise InputError(f"text: the file is larger than {MAX_FILE_BYTES // 1024} KiB")
    if "\x00" in text:
        raise InputError("text: the file contains NUL bytes; is it a binary file?")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _context_file_locked(*, workspace, repository: str, path: str, actor) -> ContextFile:
    """The file (created, and audited, on its first import), locked for this import."""
    context_file, file_created = ContextFile.objects.get_or_create(
        workspace=workspace,
        repository=repository,
        path=path,
        defaults={"created_by": actor if getattr(actor, "pk", None) else None},
    )
    context_file = ContextFile.objects.select_for_update().get(pk=context_file.pk)
    if file_created:
        audit_record(
            workspace=workspace, actor=actor, action="context_file.create", obj=context_file
        )
    return context_file


def _revision_create(
    context_file: ContextFile, *, text: str, revision: str, digest: str, actor
) -> tuple[ContextFileRevision, list[Instruction]]:
    """The next revision and its instructions, each matched to the one it continues."""
    previous = context_file.revisions.order_by("-number").first()
    parsed = parse_context_file(text)
    new_revision = ContextFileRevision.objects.create(
        workspace=context_file.workspace,
        context_file=context_file,
        number=(previous.number + 1) if previous else 1,
        revision=revision,
        content_hash=digest,
        text=text,
        token_estimate=parsed.tokens,
        instruction_count=len(parsed.instructions),
        previous=previous,
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    old = list(previous.instructions.order_by("position")) if previous else []
    matches = {}
    if previous is not None:
        summary = diff_instructions([i.text for i in old], [p.text for p in parsed.instructions])
        new_revision.diff_counts = summary.counts
        new_revision.save(update_fields=["diff_counts"])
        matches = {c.new_index: c for c in summary.changes if c.new_index is not None}
    rows = []
    for index, parsed_instruction in enumerate(parsed.instructions):
        change = matches.get(index)
        before = old[change.old_index] if change and change.old_index is not None else None
        rows.append(_instruction_row(new_revision, parsed_instruction, change, before))
    Instruction.objects.bulk_create(rows)
    return new_revision, rows


def _instruction_row(revision: ContextFileRevision, parsed, change, before) -> Instruction:
    """One instruction of a new revision; what a person set on `before` carries forward."""
    row = Instruction(
        workspace=revision.workspace,
        revision=revision,
        position=parsed.position,
        section=parsed.section[:500],
        kind=parsed.kind,
        text=parsed.text,
        line_start=parsed.line_start,
        line_end=parsed.line_end,
        token_estimate=parsed.tokens,
        category=parsed.category.value,
        category_basis=parsed.category_basis[:300],
        previous=before,
        change=(change.kind.value if change else ChangeKind.ADDED.value),
    )
    if before is not None:
        for name in CARRIED_FIELDS:
            setattr(row, name, getattr(before, name))
        if before.category_corrected:
            row.category = before.category
            row.category_corrected = True
            row.category_basis = "set by a person on an earlier revision"
    return row


def context_file_update_settings(*, context_file: ContextFile, review_interval_days: int, actor):
    if not 1 <= review_interval_days <= 3650:
        raise InputError("review_interval_days: choose between 1 and 3650 days")
    with transaction.atomic():
        before = context_file.review_interval_days
        context_file.review_interval_days = review_interval_days
        context_file.save(update_fields=["review_interval_days"])
        audit_record(
            workspace=context_file.workspace, actor=actor, action="context_file.update",
            obj=context_file, data={"review_interval_days": [before, review_interval_days]},
        )  # fmt: skip
    return context_file
