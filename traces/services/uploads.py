"""Raw uploads: bytes stored exactly as received (spooled, hashed, stored once per
workspace), and the ingest job queued for them."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.db import IntegrityError, transaction

from governance.models import Job, Workspace
from governance.services import (
    InputError,
    audit_record,
    job_create,
    job_enqueue,
)
from traces.formats import FORMATS
from traces.models import RawUpload
from traces.services._common import (
    CHUNK,
    JOB_KIND,
    UploadTooLarge,
    _temp_dir,
)


class _MovableTempFile(File):
    """A temp file FileSystemStorage can move into place instead of copying."""

    def temporary_file_path(self) -> str:
        return self.file.name


def raw_upload_store(
    *,
    workspace: Workspace,
    name: str,
    chunks: Iterable[bytes],
    source: str,
    user=None,
    content_type: str = "",
    max_bytes: int | None = None,
    durable: bool = True,
) -> tuple[RawUpload, bool]:
    """Store bytes exactly as received, under a server-generated name.

    With `durable` (uploads and OTLP, where a 2xx answer promises durability) the bytes
    are fsynced before the row commits. The CLI passes durable=False: its source file
    still exists, and an fsync per file would dominate ingesting a folder of transcripts.
    Returns (upload, created). The same bytes in the same workspace are stored once.
    """
    spooled = _spool(name, chunks, max_bytes=max_bytes, durable=durable)
    return _raw_uploads_keep(
        workspace, [spooled], source=source, user=user, content_type=content_type
    )[0]


def raw_uploads_store_paths(
    *, workspace: Workspace, paths: list[Path], source: str, user=None
) -> list[RawUpload]:
    """`raw_upload_store` (not durable) for several local files, with one lookup and one
    insert for all of them."""
    spooled = []
    try:
        for path in paths:
            with open(path, "rb") as handle:
                spooled.append(
                    _spool(path.name, iter(lambda: handle.read(CHUNK), b""), durable=False)
                )
    except BaseException:
        for item in spooled:  # _raw_uploads_keep removes them otherwise
            _remove_if_present(item.temp_path)
        raise
    return [upload for upload, _ in _raw_uploads_keep(workspace, spooled, source=source, user=user)]


@dataclass
class _Spooled:
    name: str
    temp_path: str
    sha256: str
    size: int


def _spool(
    name: str, chunks: Iterable[bytes], *, max_bytes: int | None = None, durable: bool
) -> _Spooled:
    """Write the bytes to a temp file, hashing them on the way."""
    limit = max_bytes if max_bytes is not None else settings.GOVERNANCE_MAX_UPLOAD_BYTES
    digest = hashlib.sha256()
    size = 0
    handle = tempfile.NamedTemporaryFile(dir=_temp_dir(), prefix="upload-", delete=False)  # noqa: SIM115
    try:
        for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise UploadTooLarge(f"{name}: larger than the upload limit of {limit:,} bytes")
            digest.update(chunk)
            handle.write(chunk)
        handle.flush()
        if durable:
            os.fsync(handle.fileno())
    except BaseException:
        handle.close()
        _remove_if_present(handle.name)
        raise
    handle.close()
    return _Spooled(name, handle.name, digest.hexdigest(), size)


def _raw_uploads_keep(
    workspace: Workspace, spooled: list[_Spooled], *, source: str, user=None, content_type=""
) -> list[tuple[RawUpload, bool]]:
    """Rows for spooled files: the existing row for bytes already stored, else the temp
    file moved into storage and inserted (all new ones in one statement)."""
    try:
        known = {
            upload.sha256: upload
            for upload in RawUpload.objects.filter(
                workspace=workspace, sha256__in={item.sha256 for item in spooled}
            )
        }
        new: dict[str, RawUpload] = {}
        for item in spooled:
            if item.sha256 in known or item.sha256 in new:
                continue
            upload = RawUpload(
                workspace=workspace,
                sha256=item.sha256,
                original_name=os.path.basename(item.name)[:500] or "upload",
                size=item.size,
                content_type=content_type[:100],
                source=source,
                uploaded_by=user if getattr(user, "pk", None) else None,
            )
            with open(item.temp_path, "rb") as stored:
                upload.file.save(item.sha256, _MovableTempFile(stored), save=False)
            new[item.sha256] = upload
        if new:
            try:
                with transaction.atomic():
                    RawUpload.objects.bulk_create(list(new.values()))
            except IntegrityError:  # a concurrent upload of some of the same bytes won
                for sha256, upload in list(new.items()):
                    winner = _save_or_existing(upload)
                    if winner is not upload:
                        known[sha256] = winner
                        del new[sha256]
        results, created = [], set()
        for item in spooled:
            upload = new.get(item.sha256)
            if upload is None:
                results.append((known[item.sha256], False))
            else:
                results.append((upload, item.sha256 not in created))
                created.add(item.sha256)
        return results
    finally:
        for item in spooled:
            _remove_if_present(item.temp_path)


def _save_or_existing(upload: RawUpload) -> RawUpload:
    try:
        with transaction.atomic():
            upload.save()
        return upload
    except IntegrityError:
        # Both wrote the same content, possibly to the same (content-addressed) name: only
        # remove our copy if it is a different file.
        existing = RawUpload.objects.get(workspace=upload.workspace, sha256=upload.sha256)
        if upload.file.name != existing.file.name:
            upload.file.delete(save=False)
        return existing


def _remove_if_present(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def trace_uploads_receive(
    *, workspace: Workspace, user, files: list, source: str, fmt: str = "auto"
) -> Job:
    """Store each uploaded file, then queue one ingest job for all of them."""
    if fmt != "auto" and fmt not in FORMATS:
        raise InputError(f"format must be auto or one of {', '.join(FORMATS)}")
    if not files:
        raise InputError("no files: choose one or more transcript files or an archive")
    uploads = []
    for uploaded in files:
        upload, _ = raw_upload_store(
            workspace=workspace,
            name=uploaded.name,
            chunks=uploaded.chunks(CHUNK),
            source=source,
            user=user,
            content_type=getattr(uploaded, "content_type", "") or "",
        )
        uploads.append(upload)
    return ingest_job_queue(workspace=workspace, user=user, uploads=uploads, fmt=fmt)


def ingest_job_queue(
    *, workspace: Workspace, user, uploads: list[RawUpload], fmt: str = "auto"
) -> Job:
    names = ", ".join(u.original_name for u in uploads[:3]) + ("…" if len(uploads) > 3 else "")
    with transaction.atomic():
        job = job_create(
            workspace=workspace,
            kind=JOB_KIND,
            user=user,
            label=f"Ingest {names}",
            params={"uploads": [u.pk for u in uploads], "format": fmt},
            progress_unit="bytes",
        )
        RawUpload.objects.filter(pk__in=[u.pk for u in uploads], job__isnull=True).update(job=job)
        audit_record(
            workspace=workspace,
            actor=user,
            action="trace_upload.create",
            obj=job,
            data={
                "files": [u.original_name for u in uploads],
                "sha256": [u.sha256[:16] for u in uploads],
            },
        )
        job_enqueue(job=job, task="traces.ingest_uploads")
    return job
