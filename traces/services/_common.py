"""What the trace services share: upload limits and names, the session settings a
bulk load runs under, and the refreshes after one."""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

from governance.models import Workspace
from governance.services import InputError
from traces.ingest import IngestSummary

CHUNK = 1 << 20
JOB_KIND = "trace_ingest"
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".gz")
TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".ndjson", *ARCHIVE_SUFFIXES)


class UploadTooLarge(InputError):
    pass


def _temp_dir() -> str:
    path = Path(settings.MEDIA_ROOT) / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


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


def _meta_key(name: str) -> str:
    return os.path.basename(name).removesuffix(".meta.json").removesuffix(".jsonl")


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
