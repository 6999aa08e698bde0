"""Writes for traces: store raw uploads durably, ingest them (web, API, CLI, OTLP)."""

from __future__ import annotations

import gc
import glob as globmodule
import hashlib
import multiprocessing
import os
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files import File
from django.db import IntegrityError, connection, connections, transaction

from governance.models import Job, Workspace
from governance.services import (
    InputError,
    JobReporter,
    audit_record,
    job_create,
    job_enqueue,
    workspace_bump_data_version,
)
from traces.analytics.services import analytics_refresh_queue
from traces.derive import sessions_derive_many
from traces.formats import FORMATS, detect_format, make_parser
from traces.formats.archive import (
    READ_ERRORS,
    ArchiveError,
    Limits,
    inventory,
    open_members,
)
from traces.formats.otlp import OtlpResult, parse_request
from traces.ingest import IngestSummary, TraceLoader
from traces.models import IngestedFile, RawUpload, Session, UploadSource

CHUNK = 1 << 20
JOB_KIND = "trace_ingest"
TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".ndjson", ".zip", ".tar", ".tar.gz", ".tgz", ".gz")


class UploadTooLarge(InputError):
    pass


# --- raw uploads ---------------------------------------------------------------------


class _MovableTempFile(File):
    """A temp file FileSystemStorage can move into place instead of copying."""

    def temporary_file_path(self) -> str:
        return self.file.name


def _temp_dir() -> str:
    path = Path(settings.MEDIA_ROOT) / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


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
    from traces.tasks import ingest_uploads

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
        job_enqueue(job=job, task=ingest_uploads)
    return job


# --- ingestion ---------------------------------------------------------------------------


@contextmanager
def _relaxed_commits():
    """On PostgreSQL, don't wait for the WAL flush on each batch commit while ingesting.

    The raw upload was committed durably before this; what is loaded here is derived
    from it and is rebuilt idempotently if a crash loses the last moments of work.
    """
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO OFF")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO DEFAULT")


@contextmanager
def _collector_paused():
    """Without automatic cyclic garbage collection, then one young-generation pass.

    A load allocates millions of short-lived, acyclic objects (parsed lines, records,
    rows), which reference counting frees. The collector kept walking the survivors of
    each batch: about 0.7 s per worker on the benchmark corpus, to find nothing (peak RSS
    is the same without it). Objects made meanwhile stay in the youngest generation, so
    the final pass sees every cycle the load may have left.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.collect(0)


@contextmanager
def _local_path(upload: RawUpload):
    try:
        yield Path(upload.file.path)
        return
    except NotImplementedError:
        pass
    with tempfile.NamedTemporaryFile(dir=_temp_dir(), prefix="fetch-") as handle:
        with upload.file.open("rb") as remote:
            for chunk in iter(lambda: remote.read(CHUNK), b""):
                handle.write(chunk)
        handle.flush()
        yield Path(handle.name)


def _meta_key(name: str) -> str:
    return os.path.basename(name).removesuffix(".meta.json").removesuffix(".jsonl")


class _Ingestion:
    """One loader shared by the files of an upload, or of a CLI chunk: their calls go to
    the database in shared batches (fewer statements per small file), and each file is
    recorded as ingested only once its calls are committed, so a killed worker's files
    are read again by the retry."""

    def __init__(self, *, workspace: Workspace, summary: IngestSummary):
        self.workspace = workspace
        self.summary = summary
        self.loader = TraceLoader(
            workspace=workspace, summary=summary, file_name="", derive_new_sessions=True
        )
        self.files: list[IngestedFile] = []
        self._checked: set[str] = set()  # contents looked up in IngestedFile
        self._done: set[str] = set()  # of those, the ones already ingested

    def already_ingested(self, sha256s: list[str]) -> set[str]:
        """Which of these contents were ingested before or earlier in this ingestion;
        looks up only those not asked about yet (see `look_up`)."""
        self.look_up(sha256s)
        return (self._done | {f.sha256 for f in self.files}) & set(sha256s)

    def look_up(self, sha256s: list[str]) -> None:
        """One query for many contents (a CLI chunk's files) instead of one per file."""
        unchecked = set(sha256s) - self._checked
        if unchecked:
            self._done |= set(
                IngestedFile.objects.filter(
                    workspace=self.workspace, sha256__in=unchecked
                ).values_list("sha256", flat=True)
            )
            self._checked |= unchecked

    def finish(self) -> set[int]:
        """Flush, derive what the loader may, record the files; returns the sessions
        that still need the derive step."""
        touched = self.loader.finish()
        if self.files:
            # INSERT … ON CONFLICT DO NOTHING: a concurrent worker may have recorded one first.
            IngestedFile.objects.bulk_create(self.files, ignore_conflicts=True)
            self.files = []
        return touched


def ingest_upload(
    *,
    workspace: Workspace,
    upload: RawUpload,
    summary: IngestSummary,
    fmt: str = "auto",
    extra_meta: dict[str, bytes] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> set[int]:
    """Ingest every transcript in one stored upload. Returns the sessions that still
    need the derive step (`summary.derived_sessions` holds those already derived)."""
    ingestion = _Ingestion(workspace=workspace, summary=summary)
    with _relaxed_commits(), _collector_paused():
        _ingest_upload_into(ingestion, upload, fmt=fmt, extra_meta=extra_meta, on_bytes=on_bytes)
        return ingestion.finish()


def _ingest_upload_into(
    ingestion: _Ingestion,
    upload: RawUpload,
    *,
    fmt: str = "auto",
    extra_meta: dict[str, bytes] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> None:
    summary = ingestion.summary
    with _local_path(upload) as path:
        try:
            listing = inventory(path, upload.original_name, Limits(), known_sha256=upload.sha256)
        except ArchiveError as exc:
            summary.errors.append({"file": upload.original_name, "line": None, "error": str(exc)})
            return
        for member, reason in listing.errors:
            summary.errors.append(
                {"file": f"{upload.original_name}:{member}", "line": None, "error": reason}
            )
        if listing.stopped:
            summary.errors.append(
                {"file": upload.original_name, "line": None, "error": listing.stopped}
            )
        meta = {_meta_key(k): v for k, v in {**(extra_meta or {}), **listing.meta}.items()}
        wanted = {}
        done = ingestion.already_ingested([m.sha256 for m in listing.members])
        for member in listing.members:
            if member.sha256 in done:
                summary.skipped_files += 1
                if on_bytes:
                    on_bytes(member.size)
                continue
            wanted.setdefault(member.name, member)
        if not wanted:
            return
        try:
            for name, stream in open_members(path, listing.kind, upload.original_name, set(wanted)):
                member = wanted[name]
                display = (
                    name if listing.kind in {"plain", "gzip"} else f"{upload.original_name}:{name}"
                )
                _ingest_member(
                    ingestion,
                    upload=upload,
                    display=display,
                    member_name=name,
                    sha256=member.sha256,
                    stream=stream,
                    fmt=fmt,
                    meta=meta,
                )
                if on_bytes:
                    on_bytes(member.size)
        except ArchiveError as exc:
            summary.errors.append({"file": upload.original_name, "line": None, "error": str(exc)})


def _ingest_member(
    ingestion: _Ingestion, *, upload, display, member_name, sha256, stream, fmt, meta
) -> None:
    summary = ingestion.summary
    head = stream.peek(8192)[:8192] if hasattr(stream, "peek") else b""
    chosen = fmt if fmt != "auto" else detect_format(member_name, head)
    if not head.strip():
        summary.errors.append(
            {"file": display, "line": None, "error": "empty file (nothing to ingest)"}
        )
        return
    if chosen is None:
        summary.errors.append(
            {
                "file": display,
                "line": 1,
                "error": "not a recognised trace format (Claude Code, Codex or OTLP/JSON)",
            }
        )
        return
    sidecar = None
    raw_meta = meta.get(_meta_key(member_name))
    if raw_meta:
        try:
            sidecar = orjson.loads(raw_meta)
        except orjson.JSONDecodeError:
            summary.errors.append(
                {"file": display + ".meta.json", "line": None, "error": "sidecar is not valid JSON"}
            )
    parser = make_parser(chosen, member_name, sidecar if isinstance(sidecar, dict) else None)
    loader = ingestion.loader
    loader.file_name = display
    try:
        for record in parser.parse(stream):
            loader.feed(record)
    except READ_ERRORS as exc:
        summary.errors.append(
            {
                "file": display,
                "line": parser.stats.lines or None,
                "error": f"stopped reading after line {parser.stats.lines:,}, truncated or "
                f"corrupt: {str(exc) or type(exc).__name__} (the records before it are kept)",
            }
        )
    stats = parser.stats
    summary.files += 1
    summary.duplicates_dropped += stats.duplicates_dropped
    summary.malformed_lines += stats.malformed_lines
    ingestion.files.append(
        IngestedFile(
            workspace=ingestion.workspace,
            sha256=sha256,
            upload=upload,
            member=display[:1000],
            harness={"claude-code": "claude-code", "codex": "codex"}.get(chosen, "otlp"),
            lines=stats.lines,
            calls=stats.records,
            duplicates_dropped=stats.duplicates_dropped,
            malformed_lines=stats.malformed_lines,
        )
    )


def sessions_derive(*, session_ids: Iterable[int]) -> None:
    with _relaxed_commits():
        sessions_derive_many(session_ids=session_ids)


def trace_ingest_job_run(job: Job, reporter: JobReporter) -> None:
    """The work of an ingest job: every upload named in its params."""
    workspace = job.workspace
    uploads = list(
        RawUpload.objects.filter(workspace=workspace, pk__in=job.params.get("uploads", []))
    )
    fmt = job.params.get("format", "auto")
    reporter.set_total(sum(u.size for u in uploads) or None, unit="bytes")
    extra_meta = {}
    for upload in uploads:
        if upload.original_name.endswith(".meta.json") and upload.size <= 64 * 1024:
            with upload.file.open("rb") as handle:
                extra_meta[upload.original_name] = handle.read()
    summary = IngestSummary()
    touched: set[int] = set()
    reported = 0  # errors are shown as each upload ends, and kept if a later one fails
    for upload in uploads:
        if upload.original_name.endswith(".meta.json"):
            reporter.advance(upload.size)
            continue
        touched |= ingest_upload(
            workspace=workspace,
            upload=upload,
            summary=summary,
            fmt=fmt,
            extra_meta=extra_meta,
            on_bytes=reporter.advance,
        )
        reporter.set_counts(**summary.counts())
        reporter.extend_errors(summary.errors[reported:])
        reported = len(summary.errors)
    sessions_derive(session_ids=touched)
    if touched or summary.derived_sessions:
        workspace_bump_data_version(workspace=workspace)
        analytics_refresh_queue(workspace=workspace)
    reporter.set_counts(**summary.counts())
    reporter.extend_errors(summary.errors[reported:])


def ingest_paths(
    *,
    workspace: Workspace,
    paths: list[str],
    fmt: str = "auto",
    user=None,
    workers: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
    refresh_analytics: bool = True,
) -> IngestSummary:
    """The CLI: files, folders (recursively) or globs.

    With `workers` > 1, files are ingested by that many forked processes (files are
    independent and every write is idempotent), then sessions are derived the same way.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise InputError(f"format must be auto or one of {', '.join(FORMATS)}")
    files = expand_paths(paths)
    total = sum(f.stat().st_size for f in files)
    meta = {
        str(f): f.read_bytes()
        for f in files
        if f.name.endswith(".meta.json") and f.stat().st_size <= 65536
    }
    for path in files:
        sibling = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
        wanted = path.name.endswith(".jsonl") and str(sibling) not in meta and sibling.exists()
        if wanted and sibling.stat().st_size <= 65536:
            meta[str(sibling)] = sibling.read_bytes()
    transcripts = [path for path in files if not path.name.endswith(".meta.json")]
    tasks = [
        (workspace.pk, getattr(user, "pk", None), chunk, fmt, meta)
        for chunk in _chunks(transcripts, total=total, workers=workers)
    ]
    summary = IngestSummary()
    touched: set[int] = set()
    done = sum(f.stat().st_size for f in files if f.name.endswith(".meta.json"))
    parallel = workers > 1 and len(tasks) > 1 and not multiprocessing.current_process().daemon
    if parallel:
        connections.close_all()  # children must open their own connections
        context = multiprocessing.get_context("fork")
        # gc.freeze: the collector then skips the heap the workers inherit (Django, the
        # app), which otherwise it walks again and again while parsing allocates.
        with context.Pool(workers, initializer=gc.freeze) as pool:
            for part, part_touched, size in pool.imap_unordered(_ingest_files_task, tasks):
                summary.merge(part)
                touched |= part_touched
                done += size
                if on_progress:
                    on_progress(done, total)
            ids = sorted(touched)
            pool.map(_derive_task, [ids[i::workers] for i in range(workers)])
    else:
        for task in tasks:
            part, part_touched, size = _ingest_files_task(task)
            summary.merge(part)
            touched |= part_touched
            done += size
            if on_progress:
                on_progress(done, total)
        sessions_derive(session_ids=touched)
    if touched or summary.derived_sessions:
        workspace_bump_data_version(workspace=workspace)
        if refresh_analytics:
            analytics_refresh_queue(workspace=workspace)
    # One audit row per run, with its totals (not one per file or call).
    audit_record(
        workspace=workspace,
        actor=user,
        action="trace_ingest.cli",
        data={
            "paths": len(paths),
            "format": fmt,
            **summary.counts(),
            "errors": len(summary.errors),
        },
    )
    return summary


CHUNK_BYTES = 32 * 1024 * 1024
CHUNK_FILES = 64


def _chunks(paths: list[Path], *, total: int, workers: int) -> list[list[str]]:
    """Consecutive files (a session's subagent files sit beside it) in groups of up to
    32 MiB or 64 files, small enough that every worker gets several."""
    target = max(1, min(CHUNK_BYTES, total // max(1, workers * 4)))
    chunks: list[list[str]] = []
    size = 0
    for path in paths:
        if not chunks or size >= target or len(chunks[-1]) >= CHUNK_FILES:
            chunks.append([])
            size = 0
        chunks[-1].append(str(path))
        size += path.stat().st_size
    return chunks


def _ingest_files_task(task) -> tuple[IngestSummary, set[int], int]:
    """Store and ingest a chunk of files through one loader (in a worker process when parallel)."""
    workspace_pk, user_pk, path_names, fmt, meta = task
    workspace = Workspace.objects.get(pk=workspace_pk)
    user = get_user_model().objects.filter(pk=user_pk).first() if user_pk else None
    summary = IngestSummary()
    paths = [Path(name) for name in path_names]
    # Stored (and committed) before any of it is parsed.
    uploads = raw_uploads_store_paths(
        workspace=workspace, paths=paths, source=UploadSource.CLI, user=user
    )
    size = sum(upload.size for upload in uploads)
    ingestion = _Ingestion(workspace=workspace, summary=summary)
    ingestion.look_up([upload.sha256 for upload in uploads])  # a plain file is its own member
    with _relaxed_commits(), _collector_paused():
        for upload in uploads:
            _ingest_upload_into(ingestion, upload, fmt=fmt, extra_meta=meta)
        touched = ingestion.finish()
    return summary, touched, size


def _derive_task(session_ids: list[int]) -> None:
    sessions_derive(session_ids=session_ids)
    connections.close_all()


def expand_paths(paths: list[str]) -> list[Path]:
    """Files named directly, found in folders (recursively), or matched by globs; sorted, unique."""
    found: dict[str, Path] = {}
    for raw in paths:
        matches = globmodule.glob(raw, recursive=True) if any(ch in raw for ch in "*?[") else [raw]
        if not matches:
            raise InputError(f"{raw}: no such file, folder or glob match")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                for child in sorted(path.rglob("*")):
                    if child.is_file() and child.name.endswith(TRANSCRIPT_SUFFIXES):
                        found[str(child)] = child
            elif path.is_file():
                found[str(path)] = path
            else:
                raise InputError(f"{raw}: no such file or folder")
    return [found[k] for k in sorted(found)]


# --- OTLP ------------------------------------------------------------------------------------


def otlp_receive(*, workspace: Workspace, user, body: bytes, content_type: str) -> OtlpResult:
    """Store the raw request, decode it, and load its calls before answering (2xx means
    durable). A body that cannot be decoded is kept too, then OtlpDecodeError is raised."""
    upload, created = raw_upload_store(
        workspace=workspace,
        name="otlp-request.pb" if "protobuf" in content_type else "otlp-request.json",
        chunks=[body],
        source=UploadSource.OTLP,
        user=user,
        content_type=content_type,
    )
    result = parse_request(body, content_type)
    if not created:
        return result  # the same bytes were received before: nothing new is written
    summary = IngestSummary()
    if result.calls:
        loader = TraceLoader(
            workspace=workspace,
            summary=summary,
            file_name=upload.original_name,
            mark_new_sessions=True,
        )
        loader.prepare_sessions(list(result.sessions.values()))
        for record in result.records():
            loader.feed(record)
        touched = loader.finish()
        if touched:
            # Sessions this request created too: a derive run may have cleared the mark
            # they were created with before these calls committed.
            _sessions_mark(touched)
            workspace_id = workspace.pk
            transaction.on_commit(lambda: derive_pending_queue(workspace_id=workspace_id))
    # One audit row per stored request, with its counts (not one per span or call).
    audit_record(
        workspace=workspace,
        actor=user,
        action="trace_otlp.receive",
        obj=upload,
        data={
            "bytes": upload.size,
            "spans": result.spans,
            "ignored_spans": result.ignored_spans,
            "rejected_spans": len(result.rejected),
            # Spans whose call was stored already (a resent batch) or repeated in this one.
            "duplicate_spans": len(result.calls) - summary.calls,
            "calls": summary.calls,
            "sessions": summary.sessions,
            "agents": summary.agents,
        },
    )
    return result


DERIVE_DEBOUNCE_SECONDS = 2


def _sessions_mark(ids) -> None:
    """Mark sessions whose new calls have committed as needing the derive step.

    Every row is locked, in id order as the derive step locks them (so the two cannot
    deadlock), even one that reads as marked already: a derive holding it may be about to
    clear the mark without having seen these calls; once it commits, the mark is set
    again."""
    with transaction.atomic():
        locked = Session.objects.filter(pk__in=ids).order_by("pk").select_for_update(no_key=True)
        unmarked = [pk for pk, marked in locked.values_list("pk", "needs_derive") if not marked]
        if unmarked:
            Session.objects.filter(pk__in=unmarked).update(needs_derive=True)


def derive_pending_queue(*, workspace_id: int) -> None:
    """Derive the sessions OTLP touched, at most once per couple of seconds per workspace.

    Spans arrive in many small requests; deriving on each would repeat the same work."""
    from django.core.cache import cache

    from traces.tasks import derive_pending

    if cache.add(f"traces:derive-pending:{workspace_id}", 1, timeout=DERIVE_DEBOUNCE_SECONDS):
        derive_pending.apply_async(args=[workspace_id], countdown=DERIVE_DEBOUNCE_SECONDS)


def derive_pending_queue_all() -> list[int]:
    """Queue the derive step of every workspace that has sessions still marked; returns
    their ids. A worker killed mid-derive leaves its sessions marked, and its message comes
    back from the broker only after the visibility timeout: this runs them sooner."""
    workspace_ids = sorted(
        Session.objects.filter(needs_derive=True).values_list("workspace_id", flat=True).distinct()
    )
    for workspace_id in workspace_ids:
        derive_pending_queue(workspace_id=workspace_id)
    return workspace_ids


def derive_pending_run(*, workspace_id: int, limit: int = 2000) -> int:
    """Derive every session marked as needing it; returns how many.

    Releases the debounce lock first, so calls that arrive during this run queue the next one."""
    from django.core.cache import cache

    cache.delete(f"traces:derive-pending:{workspace_id}")
    ids = list(
        Session.objects.filter(workspace_id=workspace_id, needs_derive=True).values_list(
            "id", flat=True
        )[:limit]
    )
    if not ids:
        return 0
    # The derive step clears each mark in the transaction that derives the session.
    sessions_derive_run(workspace_id=workspace_id, session_ids=ids)
    if len(ids) == limit:
        derive_pending_queue(workspace_id=workspace_id)
    return len(ids)


def sessions_derive_run(*, workspace_id: int, session_ids: list[int]) -> None:
    sessions_derive(session_ids=session_ids)
    workspace = Workspace.objects.get(pk=workspace_id)
    workspace_bump_data_version(workspace=workspace)
    analytics_refresh_queue(workspace=workspace)


def ingest_bytes(
    *,
    workspace: Workspace,
    name: str,
    data: bytes,
    source: str,
    user=None,
    refresh_analytics: bool = True,
) -> IngestSummary:
    """Store and ingest one in-memory file (demo data, tests, small API payloads)."""
    upload, _ = raw_upload_store(
        workspace=workspace, name=name, chunks=[data], source=source, user=user
    )
    summary = IngestSummary()
    touched = ingest_upload(workspace=workspace, upload=upload, summary=summary)
    sessions_derive(session_ids=touched)
    if touched or summary.derived_sessions:
        workspace_bump_data_version(workspace=workspace)
        if refresh_analytics:
            analytics_refresh_queue(workspace=workspace)
    return summary
