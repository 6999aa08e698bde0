"""The CLI ingest: files, folders or globs, in chunks, optionally in forked workers."""

from __future__ import annotations

import gc
import glob as globmodule
import multiprocessing
import threading
from collections.abc import Callable
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import connection, connections

from governance.models import Workspace
from governance.services import (
    InputError,
    audit_record,
    workspace_bump_data_version,
)
from traces.formats import FORMATS
from traces.ingest import IngestSummary
from traces.models import UploadSource
from traces.services._common import (
    ARCHIVE_SUFFIXES,
    TRANSCRIPT_SUFFIXES,
    _collector_paused,
    _meta_key,
    _refresh_analytics,
    _relaxed_commits,
    tables_analyze_after_load,
)
from traces.services.derivation import sessions_derive
from traces.services.ingestion import (
    _ingest_upload_into,
    _Ingestion,
)
from traces.services.uploads import raw_uploads_store_paths


class _Progress:
    """Bytes of input done so far, reported to `on_progress(done, total)` when given."""

    def __init__(self, *, done: int, total: int, on_progress: Callable[[int, int], None] | None):
        self.done, self.total, self.on_progress = done, total, on_progress

    def advance(self, size: int) -> None:
        self.done += size
        if self.on_progress:
            self.on_progress(self.done, self.total)


def _sidecars(files: list[Path]) -> dict:
    """The `.meta.json` sidecars (up to 64 KiB) of the files given, or found beside a
    transcript given alone, by key."""
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
    return meta


def _can_fork(*, workers: int, tasks: list) -> bool:
    """Whether to ingest in forked workers.

    Forking copies the locks other threads hold, which hung or broke a child's database
    connection in a process that also ran a server or a browser driver (the CLI has
    none); and workers cannot see what an open transaction of the caller wrote. Then
    this process ingests in itself.
    """
    return (
        workers > 1
        and len(tasks) > 1
        and not multiprocessing.current_process().daemon
        and threading.active_count() == 1
        and not connection.in_atomic_block
    )


def _ingest_forked(
    tasks: list, *, workers: int, progress: _Progress
) -> tuple[IngestSummary, set[int]]:
    """Ingest the chunks in `workers` forked processes, then derive the sessions touched
    the same way."""
    summary = IngestSummary()
    touched: set[int] = set()
    connections.close_all()  # children must open their own connections
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_worker_start) as pool:
        for part, part_touched, size in pool.imap_unordered(_ingest_files_task, tasks):
            summary.merge(part)
            touched |= part_touched
            progress.advance(size)
        ids = sorted(touched)
        pool.map(_derive_task, [ids[i::workers] for i in range(workers)])
    return summary, touched


def _ingest_here(tasks: list, *, progress: _Progress) -> tuple[IngestSummary, set[int]]:
    """Ingest the chunks one after another in this process, then derive the sessions."""
    summary = IngestSummary()
    touched: set[int] = set()
    for task in tasks:
        part, part_touched, size = _ingest_files_task(task)
        summary.merge(part)
        touched |= part_touched
        progress.advance(size)
    sessions_derive(session_ids=touched)
    return summary, touched


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
    meta = _sidecars(files)
    transcripts = [path for path in files if not path.name.endswith(".meta.json")]
    tasks = [
        (workspace.pk, getattr(user, "pk", None), chunk, fmt, meta)
        for chunk in _chunks(transcripts, total=total, workers=workers)
    ]
    done = sum(f.stat().st_size for f in files if f.name.endswith(".meta.json"))
    progress = _Progress(done=done, total=total, on_progress=on_progress)
    if _can_fork(workers=workers, tasks=tasks):
        summary, touched = _ingest_forked(tasks, workers=workers, progress=progress)
    else:
        summary, touched = _ingest_here(tasks, progress=progress)
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
