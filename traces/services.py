"""Writes for traces: store raw uploads durably, ingest them (web, API, CLI, OTLP)."""

from __future__ import annotations

import gc
import glob as globmodule
import hashlib
import multiprocessing
import os
import tempfile
import threading
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
    task_named,
    workspace_bump_data_version,
)
from traces.derive import sessions_derive_many
from traces.formats import FORMATS, RESUMABLE_FORMATS, detect_format, make_parser
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
FILE_RESULT_FIELDS = (
    "member", "harness", "lines", "calls", "duplicates_dropped", "malformed_lines", "complete",
    "start_offset", "grown_from", "parser_state",
)  # fmt: skip
JOB_KIND = "trace_ingest"
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".gz")
TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".ndjson", *ARCHIVE_SUFFIXES)


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
        self.files: list[IngestedFile] = []  # read here; finish() records them as complete
        self._started: dict[str, IngestedFile] = {}  # sha256 -> its row, created before reading
        self._earlier: dict[str, list[IngestedFile]] = {}  # name -> resumable reads of it
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
                    workspace=self.workspace, sha256__in=unchecked, complete=True
                ).values_list("sha256", flat=True)
            )
            self._checked |= unchecked

    def start(self, files: list[tuple[RawUpload, str, str, int]]) -> None:
        """Rows for files about to be read, (upload, name, sha256, size), created incomplete
        in one statement, so that each call can name its file. A row that a killed load
        left incomplete is reused."""
        new = [item for item in files if item[2] not in self._started]
        if not new:
            return
        IngestedFile.objects.bulk_create(
            [
                IngestedFile(
                    workspace=self.workspace, upload=upload, member=name[:1000], sha256=sha256,
                    size=size, complete=False,
                )
                for upload, name, sha256, size in new
            ],
            ignore_conflicts=True,  # a concurrent worker may be reading the same bytes
        )  # fmt: skip
        for row in IngestedFile.objects.filter(
            workspace=self.workspace, sha256__in=[item[2] for item in new]
        ):
            self._started[row.sha256] = row
        self._look_up_earlier_reads([name for _, name, _, _ in new])

    def _look_up_earlier_reads(self, names: list[str]) -> None:
        names = [name[:1000] for name in names if name[:1000] not in self._earlier]
        for name in names:
            self._earlier[name] = []
        resumable = IngestedFile.objects.filter(
            workspace=self.workspace, member__in=names, complete=True, parser_state__isnull=False
        )
        for row in resumable.order_by("-size"):
            self._earlier[row.member].append(row)

    def earlier_reads(self, name: str) -> list[IngestedFile]:
        """Complete reads of files by this name that a grown copy may go on from, largest first."""
        if name[:1000] not in self._earlier:
            self._look_up_earlier_reads([name])
        return self._earlier[name[:1000]]

    def file_row(self, upload: RawUpload, name: str, sha256: str, size: int) -> IngestedFile:
        if sha256 not in self._started:
            self.start([(upload, name, sha256, size)])
        return self._started[sha256]

    def finish(self) -> set[int]:
        """Flush, derive what the loader may, record the files as complete; returns the
        sessions that still need the derive step."""
        touched = self.loader.finish()
        if self.files:
            for row in self.files:
                row.complete = True
            _files_update(self.files)
            self.files = []
        return touched


# One statement for a chunk's files: Django's bulk_update builds a CASE per field and row,
# which cost 1 ms per file in Python (3.3 s for 3,100 subagent files).
FILES_UPDATE_SQL = """
UPDATE traces_ingestedfile AS f SET member = v.member, harness = v.harness, lines = v.lines,
    calls = v.calls, duplicates_dropped = v.duplicates, malformed_lines = v.malformed,
    complete = TRUE, start_offset = v.start_offset, grown_from_id = v.grown_from,
    parser_state = v.state
FROM (VALUES {values}) AS v(id, member, harness, lines, calls, duplicates, malformed,
    start_offset, grown_from, state)
WHERE f.id = v.id
"""
FILES_UPDATE_ROW = (
    "(%s::bigint, %s, %s, %s::int, %s::int, %s::int, %s::int, %s::bigint, %s::bigint, %s::jsonb)"
)


def _files_update(rows: list[IngestedFile]) -> None:
    if connection.vendor != "postgresql":
        IngestedFile.objects.bulk_update(rows, FILE_RESULT_FIELDS)
        return
    params = []
    for row in rows:
        state = orjson.dumps(row.parser_state).decode() if row.parser_state is not None else None
        params += [
            row.pk, row.member, row.harness, row.lines, row.calls, row.duplicates_dropped,
            row.malformed_lines, row.start_offset, row.grown_from_id, state,
        ]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(
            FILES_UPDATE_SQL.format(values=", ".join([FILES_UPDATE_ROW] * len(rows))), params
        )


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
        # `extra_meta` comes keyed by `_meta_key`: a CLI chunk shares one for all its files.
        meta = extra_meta or {}
        if listing.meta:
            meta = {**meta, **{_meta_key(k): v for k, v in listing.meta.items()}}
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
        ingestion.start(
            [
                (upload, _display(upload, listing.kind, n), m.sha256, m.size)
                for n, m in wanted.items()
            ]
        )
        try:
            for name, stream in open_members(path, listing.kind, upload.original_name, set(wanted)):
                member = wanted[name]
                _ingest_member(
                    ingestion,
                    upload=upload,
                    display=_display(upload, listing.kind, name),
                    member_name=name,
                    sha256=member.sha256,
                    size=member.size,
                    stream=stream,
                    resumable=listing.kind == "plain",
                    fmt=fmt,
                    meta=meta,
                )
                if on_bytes:
                    on_bytes(member.size)
        except ArchiveError as exc:
            summary.errors.append({"file": upload.original_name, "line": None, "error": str(exc)})


def _display(upload: RawUpload, kind: str, member_name: str) -> str:
    return member_name if kind in {"plain", "gzip"} else f"{upload.original_name}:{member_name}"


def _ingest_member(
    ingestion: _Ingestion,
    *,
    upload,
    display,
    member_name,
    sha256,
    size,
    stream,
    fmt,
    meta,
    resumable=False,
) -> None:
    summary = ingestion.summary
    earlier = _grown_from(ingestion, display, size, stream) if resumable else None
    if earlier is not None:
        row = ingestion.file_row(upload, display, sha256, size)
        row.grown_from, row.start_offset = earlier, earlier.parser_state["offset"]
        stream.seek(row.start_offset)
        fmt = earlier.harness
        parser = make_parser(fmt, member_name, state=earlier.parser_state)
        _parse_into(ingestion, row, parser, display=display, fmt=fmt, lines=stream)
        _keep_parser_state(ingestion, row, parser, stream, size)
        return
    # Detection reads whole lines (as many as it needs, within a bound); the parser then
    # reads them again from `detection.replay()`, followed by the rest of the stream.
    detection = detect_format(member_name, stream)
    if detection.empty:
        summary.errors.append({"file": display, "line": None, "error": detection.reason})
        return
    chosen = fmt if fmt != "auto" else detection.format
    if chosen is None:
        summary.errors.append({"file": display, "line": detection.line, "error": detection.reason})
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
    row = ingestion.file_row(upload, display, sha256, size)
    _parse_into(ingestion, row, parser, display=display, fmt=chosen, lines=detection.replay())
    if resumable and chosen in RESUMABLE_FORMATS:
        _keep_parser_state(ingestion, row, parser, stream, size)


def _parse_into(ingestion: _Ingestion, row, parser, *, display: str, fmt: str, lines) -> None:
    """Feed a file's records to the shared loader and note what it yielded on its row."""
    summary = ingestion.summary
    loader = ingestion.loader
    loader.file_name = display
    loader.source_file_id = row.pk
    try:
        for record in parser.parse(lines):
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
    row.member = display[:1000]
    row.harness = {"claude-code": "claude-code", "codex": "codex"}.get(fmt, "otlp")
    row.lines = stats.lines
    row.calls = stats.calls
    row.duplicates_dropped = stats.duplicates_dropped
    row.malformed_lines = stats.malformed_lines
    ingestion.files.append(row)


# A file is resumed from the end of its last complete line; a last line with no newline
# yet (a transcript being written) is read again when the file grows, if it is within this
# many bytes of the end.
RESUME_TAIL_BYTES = 1 << 20


def _grown_from(ingestion: _Ingestion, display: str, size: int, stream) -> IngestedFile | None:
    """The file this one grew from: read before under the same name, with a parser state,
    and whose bytes are exactly this one's beginning. Leaves the stream at its start."""
    try:
        for earlier in ingestion.earlier_reads(display):
            if earlier.size >= size or not earlier.parser_state:
                continue
            digest = hashlib.sha256()
            stream.seek(0)
            left = earlier.size
            while left:
                chunk = stream.read(min(CHUNK, left))
                if not chunk:
                    break
                digest.update(chunk)
                left -= len(chunk)
            if digest.hexdigest() == earlier.sha256:
                return earlier
        return None
    finally:
        stream.seek(0)


def _keep_parser_state(ingestion: _Ingestion, row: IngestedFile, parser, stream, size) -> None:
    """Record where the next read of this file, grown, may start, and the parser state
    to start with. An unfinished last line is not an error: it is read when it is whole."""
    stream.seek(max(row.start_offset, size - RESUME_TAIL_BYTES))
    tail_start = stream.tell()
    tail = stream.read()
    newline = tail.rfind(b"\n")
    if newline < 0:
        return  # no complete line in the tail: a later read starts from the beginning
    partial = len(tail) - newline - 1  # bytes of an unfinished last line
    lines = parser.first_line - 1 + parser.stats.lines - (1 if partial else 0)
    if partial:
        _note_unfinished_line(ingestion.summary, row, line=lines + 1)
    state = parser.state(lines=lines)
    state["offset"] = tail_start + newline + 1
    # PostgreSQL's JSON cannot hold NUL; the loader stores such ids with U+FFFD anyway.
    row.parser_state = orjson.loads(orjson.dumps(state).replace(b"\\u0000", b"\\ufffd"))


def _note_unfinished_line(summary: IngestSummary, row: IngestedFile, *, line: int) -> None:
    for error in reversed(summary.errors):
        if error["file"] == row.member and error["line"] == line:
            if error["error"].startswith("malformed JSON"):
                summary.malformed_lines -= 1
                row.malformed_lines -= 1
            error["error"] = (
                "the last line has no newline yet (a transcript being written?): "
                "it is read when the file grows"
            )
            return


TRACE_TABLES = (
    "traces_session", "traces_agent", "traces_call", "traces_compaction", "traces_run",
    "traces_filetouch",
)  # fmt: skip


def tables_analyze_after_load(summary: IngestSummary) -> None:
    """Refresh PostgreSQL's statistics after a bulk load. Autovacuum gets to it only later:
    until then the planner took 900 new sessions for one row, and the sessions filter that
    found nothing took 0.6-0.8 s at 1M calls."""
    if connection.vendor != "postgresql":
        return
    if summary.calls < settings.GOVERNANCE_ANALYZE_AFTER_CALLS:
        return
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(TRACE_TABLES))


def _refresh_analytics(workspace: Workspace) -> None:
    # Imported here: the analytics stack loads numpy and scipy, which cost a CLI ingest
    # 1.7 s at start (of 8 s for 100 long sessions).
    from traces.analytics.services import analytics_refresh_queue

    analytics_refresh_queue(workspace=workspace)


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
                extra_meta[_meta_key(upload.original_name)] = handle.read()
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
    tables_analyze_after_load(summary)
    if touched or summary.derived_sessions:
        workspace_bump_data_version(workspace=workspace)
        _refresh_analytics(workspace)
    reporter.set_counts(**summary.counts())
    reporter.extend_errors(summary.errors[reported:])
    if not (summary.calls or summary.compactions or summary.skipped_files):
        # Not a success: nothing was loaded, and the upload was not loaded before either.
        raise InputError(
            "No data: no file of this upload held calls that could be read; the reasons are listed below."
            if summary.errors
            else "No data: this upload holds no model calls."
        )


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
        _meta_key(str(f)): f.read_bytes()
        for f in files
        if f.name.endswith(".meta.json") and f.stat().st_size <= 65536
    }
    for path in files:
        sibling = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
        key = _meta_key(str(sibling))
        wanted = path.name.endswith(".jsonl") and key not in meta and sibling.exists()
        if wanted and sibling.stat().st_size <= 65536:
            meta[key] = sibling.read_bytes()
    transcripts = [path for path in files if not path.name.endswith(".meta.json")]
    tasks = [
        (workspace.pk, getattr(user, "pk", None), chunk, fmt, meta)
        for chunk in _chunks(transcripts, total=total, workers=workers)
    ]
    summary = IngestSummary()
    touched: set[int] = set()
    done = sum(f.stat().st_size for f in files if f.name.endswith(".meta.json"))
    # Forking copies the locks other threads hold, which hung or broke a child's database
    # connection in a process that also ran a server or a browser driver (the CLI has
    # none); and workers cannot see what an open transaction of the caller wrote. Then
    # this process ingests in itself.
    parallel = (
        workers > 1
        and len(tasks) > 1
        and not multiprocessing.current_process().daemon
        and threading.active_count() == 1
        and not connection.in_atomic_block
    )
    if parallel:
        connections.close_all()  # children must open their own connections
        context = multiprocessing.get_context("fork")
        with context.Pool(workers, initializer=_worker_start) as pool:
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
    tables_analyze_after_load(summary)
    if touched or summary.derived_sessions:
        workspace_bump_data_version(workspace=workspace)
        if refresh_analytics:
            _refresh_analytics(workspace)
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
    # A plain file is its own member: look up and start all of them in two statements.
    plain = [u for u in uploads if not u.original_name.endswith(ARCHIVE_SUFFIXES)]
    done = ingestion.already_ingested([upload.sha256 for upload in uploads])
    ingestion.start([(u, u.original_name, u.sha256, u.size) for u in plain if u.sha256 not in done])
    with _relaxed_commits(), _collector_paused():
        for upload in uploads:
            _ingest_upload_into(ingestion, upload, fmt=fmt, extra_meta=meta)
        touched = ingestion.finish()
    return summary, touched, size


def _worker_start() -> None:
    # The collector then skips the heap the worker inherits (Django, the app), which it
    # otherwise walks again and again while parsing allocates.
    gc.freeze()


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

    if cache.add(f"traces:derive-pending:{workspace_id}", 1, timeout=DERIVE_DEBOUNCE_SECONDS):
        task_named("traces.derive_pending").apply_async(
            args=[workspace_id], countdown=DERIVE_DEBOUNCE_SECONDS
        )


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
    _refresh_analytics(workspace)


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
            _refresh_analytics(workspace)
    return summary
