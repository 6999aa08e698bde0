"""Ingest stored uploads: each file (or archive member) read through one shared
loader, resumed where a grown file left off; the ingest job and in-memory ingests."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import orjson
from django.db import connection

from governance.models import JOB_NO_DATA_PREFIX, Job, Workspace
from governance.services import (
    InputError,
    JobReporter,
    workspace_bump_data_version,
)
from traces.formats import RESUMABLE_FORMATS, detect_format, make_parser
from traces.formats.archive import (
    READ_ERRORS,
    ArchiveError,
    Limits,
    inventory,
    open_members,
)
from traces.ingest import IngestSummary, TraceLoader
from traces.models import IngestedFile, JobFile, RawUpload
from traces.services._common import (
    CHUNK,
    _collector_paused,
    _meta_key,
    _refresh_analytics,
    _relaxed_commits,
    _temp_dir,
    tables_analyze_after_load,
)
from traces.services.derivation import sessions_derive
from traces.services.uploads import raw_upload_store


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
        self.read_ids: set[int] = set()  # rows of the files read here
        self.skipped: set[str] = set()  # contents skipped as ingested before

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


FILE_RESULT_FIELDS = (
    "member", "harness", "lines", "calls", "duplicates_dropped", "malformed_lines", "complete",
    "start_offset", "grown_from", "parser_state",
)  # fmt: skip


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
    job: Job | None = None,
) -> set[int]:
    """Ingest every transcript in one stored upload. Returns the sessions that still
    need the derive step (`summary.derived_sessions` holds those already derived).
    With `job`, the files read and those skipped as already ingested are linked to it."""
    ingestion = _Ingestion(workspace=workspace, summary=summary)
    with _relaxed_commits(), _collector_paused():
        _ingest_upload_into(ingestion, upload, fmt=fmt, extra_meta=extra_meta, on_bytes=on_bytes)
        touched = ingestion.finish()
    if job is not None:
        _job_files_record(job, ingestion)
    return touched


def _job_files_record(job: Job, ingestion: _Ingestion) -> None:
    """Link the job to its files. A skipped file is linked to the row of its earlier read,
    so a re-upload reaches the same sessions; a grown file has a row of its own. A file
    that an earlier attempt of this job read (its upload names this job) counts as read."""
    links = [JobFile(job=job, file_id=pk, read=True) for pk in sorted(ingestion.read_ids)]
    if ingestion.skipped:
        earlier = IngestedFile.objects.filter(
            workspace=ingestion.workspace, sha256__in=ingestion.skipped, complete=True
        ).exclude(pk__in=ingestion.read_ids)
        links += [
            JobFile(job=job, file_id=pk, read=first_job == job.pk)
            for pk, first_job in earlier.values_list("pk", "upload__job_id")
        ]
    # A retry of the job links the same files again.
    JobFile.objects.bulk_create(links, batch_size=1000, ignore_conflicts=True)


def _note_listing_errors(summary, upload: RawUpload, listing) -> None:
    """The members an archive's listing refused, and why it stopped listing, as errors."""
    for member, reason in listing.errors:
        summary.errors.append(
            {"file": f"{upload.original_name}:{member}", "line": None, "error": reason}
        )
    if listing.stopped:
        summary.errors.append(
            {"file": upload.original_name, "line": None, "error": listing.stopped}
        )


def _members_to_ingest(
    ingestion: _Ingestion, listing, *, on_bytes: Callable[[int], None] | None
) -> dict:
    """The listed members by name, without those whose content was ingested before (they are
    counted as skipped, and their bytes as done)."""
    wanted = {}
    done = ingestion.already_ingested([m.sha256 for m in listing.members])
    for member in listing.members:
        if member.sha256 in done:
            ingestion.summary.skipped_files += 1
            ingestion.skipped.add(member.sha256)
            if on_bytes:
                on_bytes(member.size)
            continue
        wanted.setdefault(member.name, member)
    return wanted


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
        _note_listing_errors(summary, upload, listing)
        # `extra_meta` comes keyed by `_meta_key`: a CLI chunk shares one for all its files.
        meta = extra_meta or {}
        if listing.meta:
            meta = {**meta, **{_meta_key(k): v for k, v in listing.meta.items()}}
        wanted = _members_to_ingest(ingestion, listing, on_bytes=on_bytes)
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
    ingestion.read_ids.add(row.pk)


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
            job=job,
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
            f"{JOB_NO_DATA_PREFIX} no file of this upload held calls that could be read; "
            "the reasons are listed below."
            if summary.errors
            else f"{JOB_NO_DATA_PREFIX} this upload holds no model calls."
        )


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
