"""Jobs: long work queued by name, run with progress and a heartbeat, requeued when stale."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import Error as DatabaseLayerError
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from governance.errors import InputError
from governance.models import (
    Job,
    JobStatus,
    Workspace,
)

logger = logging.getLogger(__name__)

MAX_JOB_ERRORS = 1000


def job_create(
    *,
    workspace: Workspace,
    kind: str,
    user=None,
    label: str = "",
    params: dict | None = None,
    progress_total: int | None = None,
    progress_unit: str = "items",
) -> Job:
    return Job.objects.create(
        workspace=workspace,
        kind=kind,
        label=label[:300],
        created_by=user if getattr(user, "pk", None) else None,
        params=params or {},
        progress_total=progress_total,
        progress_unit=progress_unit,
    )


def job_enqueue(*, job: Job, task) -> None:
    """Send the job's id to its Celery task once the current transaction commits. The task's
    name is kept on the job, for the stale-job sweep to send it again.

    `task` is the task or its registered name ("qualification.analyse"): services pass the
    name, so that they never import tasks (tasks import services)."""
    if isinstance(task, str):
        task = task_named(task)
    job.task_name = task.name
    Job.objects.filter(pk=job.pk).update(task_name=task.name)
    job_id = job.pk
    transaction.on_commit(lambda: task.delay(job_id))


_TASK_IMPORT_LOCK = threading.Lock()


class TaskByName:
    """A registered task, sent to the broker by its name alone: importing every app's
    tasks to find it makes Celery's Django fix-up run the system checks, about a second
    in a short-lived process (a CLI ingest)."""

    def __init__(self, name: str):
        self.name = name

    def apply_async(self, args=(), kwargs=None, **options):
        from governance.celery import app

        return app.send_task(self.name, args=list(args), kwargs=kwargs or {}, **options)

    def delay(self, *args, **kwargs):
        return self.apply_async(args, kwargs)


def task_named(name: str):
    """The Celery task called `name` (KeyError if there is none): services send tasks by
    name, so that they never import them. With a broker, one not yet imported in this
    process is sent by name (`TaskByName`); run in-process (no broker) it must be the
    registered task, so every app's tasks are imported."""
    from governance.celery import app

    task = app.tasks.get(name)
    if task is not None:
        return task
    if not app.conf.task_always_eager:
        return TaskByName(name)
    # Registering every app's tasks is not thread-safe: requests served by threads would
    # otherwise see a half-filled registry.
    with _TASK_IMPORT_LOCK:
        app.loader.import_default_modules()
        return app.tasks[name]


class JobReporter:
    """Progress, counts and input errors for a running job, written at most every 0.5 s."""

    def __init__(self, job: Job, *, flush_interval: float = 0.5):
        self.job = job
        self.flush_interval = flush_interval
        self._last_flush = 0.0
        self.errors: list[dict] = list(job.errors or [])
        self.error_count = job.error_count

    def set_total(self, total: int | None, unit: str | None = None) -> None:
        self.job.progress_total = total
        if unit:
            self.job.progress_unit = unit
        self.flush(force=True)

    def advance(self, amount: int = 1) -> None:
        self.job.progress_done += amount
        self.flush()

    def set_done(self, done: int) -> None:
        self.job.progress_done = done
        self.flush()

    def count(self, **increments: int) -> None:
        counts = self.job.counts
        for key, value in increments.items():
            counts[key] = counts.get(key, 0) + value

    def set_counts(self, **values: Any) -> None:
        self.job.counts.update(values)

    def error(self, message: str, *, file: str = "", line: int | None = None, **extra) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_JOB_ERRORS:
            entry = {"file": file, "line": line, "error": message}
            entry.update(extra)
            self.errors.append(entry)

    def extend_errors(self, errors: Iterable[dict]) -> None:
        for entry in errors:
            self.error(entry.get("error", ""), file=entry.get("file", ""), line=entry.get("line"))

    def flush(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_flush < self.flush_interval:
            return
        self._last_flush = now
        self.job.errors = self.errors
        self.job.error_count = self.error_count
        Job.objects.filter(pk=self.job.pk).update(
            progress_done=self.job.progress_done,
            progress_total=self.job.progress_total,
            progress_unit=self.job.progress_unit,
            counts=self.job.counts,
            errors=self.errors,
            error_count=self.error_count,
            heartbeat_at=timezone.now(),
        )


class JobHeartbeat:
    """Writes a running job's `heartbeat_at` every few seconds from a thread of its own, so
    that a long step without progress (deriving sessions, one big statement) still shows
    the job alive. The beats stop when the process dies: that is what the stale-job sweep
    looks for.

    PostgreSQL only: the thread writes through a second connection beside the work's, and
    with SKIP LOCKED, so it never waits for a transaction of the work's that holds the job
    row (the sweep skips such a row too: its owner is alive). SQLite has one writer at a
    time; there the progress flushes are the beats.
    """

    def __init__(self, job_id: int, *, interval: float | None = None):
        self.job_id = job_id
        self.interval = interval or settings.GOVERNANCE_JOB_HEARTBEAT_SECONDS
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"job-{job_id}-heartbeat", daemon=True
        )

    def __enter__(self) -> JobHeartbeat:
        if connection.vendor == "postgresql":
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _beat(self) -> None:
        from django.db import connection as own  # this thread's connection

        table = own.ops.quote_name(Job._meta.db_table)
        sql = (  # the table name comes from the model; the values are parameters
            f"UPDATE {table} SET heartbeat_at = %s WHERE id = (SELECT id FROM {table} "  # noqa: S608
            "WHERE id = %s AND status = %s FOR NO KEY UPDATE SKIP LOCKED)"
        )
        try:
            while not self._stop.wait(self.interval):
                try:
                    with own.cursor() as cursor:
                        cursor.execute(sql, [timezone.now(), self.job_id, JobStatus.RUNNING])
                except Exception:  # a beat may fail; the thread must live on to the next
                    logger.warning("job %s: heartbeat not written", self.job_id, exc_info=True)
                    own.close()  # reconnect for the next beat
        finally:
            own.close()


def too_many_files_message() -> str:
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES
    return (
        f"More than {limit:,} files in one upload. Upload a .zip or .tar.gz of the folder "
        "instead, or send the files in several uploads."
    )


def job_run(
    *,
    job_id: int,
    work: Callable[[Job, JobReporter], None],
    retry_on: tuple[type[Exception], ...] = (),
) -> Job | None:
    """Run `work` for a job: mark it running, then succeeded, or failed with the reason.
    While it runs, a JobHeartbeat shows it alive to the stale-job sweep.

    InputError marks the job failed with its message (never retried). An exception in
    `retry_on` (the caller will retry) puts the job back in the queue with the reason;
    other exceptions mark it failed. Both are re-raised for the Celery task.
    """
    job = Job.objects.filter(pk=job_id).select_related("workspace").first()
    if job is None:
        logger.warning("job %s vanished before it ran", job_id)
        return None
    if job.is_finished:
        return job
    now = timezone.now()
    fresh = {}
    if job.attempts:  # another attempt does all the work again: report it once, not twice
        fresh = {"progress_done": 0, "counts": {}, "errors": [], "error_count": 0}
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        started_at=job.started_at or now,
        attempts=F("attempts") + 1,
        heartbeat_at=now,
        **fresh,
    )
    job.refresh_from_db()
    reporter = JobReporter(job)
    try:
        with JobHeartbeat(job.pk):
            work(job, reporter)
    except InputError as exc:
        _job_finish(job, reporter, status=JobStatus.FAILED, error=str(exc))
        return job
    except retry_on as exc:
        logger.warning("job %s (%s) will be retried: %s", job.pk, job.kind, exc)
        _job_requeue(job, reporter, error=f"attempt {job.attempts} failed, retrying: {exc}")
        raise
    except Exception as exc:
        logger.exception("job %s (%s) failed", job.pk, job.kind)
        _job_finish(
            job,
            reporter,
            status=JobStatus.FAILED,
            error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}",
        )
        raise
    _job_finish(job, reporter, status=JobStatus.SUCCEEDED, error="")
    return job


def _job_requeue(job: Job, reporter: JobReporter, *, error: str) -> None:
    """Back to queued (not finished, so the retry runs it), keeping its progress and errors.
    The database may be what failed: then the row stays running, which a retry runs too
    (Celery's Django fixup replaces a broken connection before the next task)."""
    try:
        reporter.flush(force=True)
        Job.objects.filter(pk=job.pk).update(
            status=JobStatus.QUEUED,
            error=error[:10000],
            attempt_log=[*job.attempt_log, _attempt_entry(job, error)],
        )
    except DatabaseLayerError:
        logger.warning("job %s could not be put back in the queue", job.pk, exc_info=True)


def _job_finish(job: Job, reporter: JobReporter, *, status: str, error: str) -> None:
    reporter.flush(force=True)
    if status == JobStatus.SUCCEEDED and job.progress_total is not None:
        job.progress_done = max(job.progress_done, job.progress_total)
    job.status = status
    job.error = error[:10000]
    job.finished_at = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        status=job.status,
        error=job.error,
        finished_at=job.finished_at,
        progress_done=job.progress_done,
    )


def _attempt_entry(job: Job, outcome: str) -> dict:
    return {"attempt": job.attempts, "at": timezone.now().isoformat(), "outcome": outcome[:1000]}


@dataclass
class StaleJobsSwept:
    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def jobs_requeue_stale(
    *, stale_after: float | None = None, max_attempts: int | None = None
) -> StaleJobsSwept:
    """Requeue every running job whose process stopped beating `stale_after` seconds ago
    (its worker was killed): its task is sent again, and runs the job from the start (job
    work is idempotent). A job that has started `max_attempts` times already, or that has
    no task to send, is failed with the reason instead."""
    from governance.celery import app

    if stale_after is None:
        stale_after = settings.GOVERNANCE_JOB_STALE_SECONDS
    if max_attempts is None:
        max_attempts = settings.GOVERNANCE_JOB_MAX_ATTEMPTS
    app.loader.import_default_modules()  # registers every app's tasks, in any process
    now = timezone.now()
    swept = StaleJobsSwept()
    with transaction.atomic():
        # SKIP LOCKED: a job whose row a transaction holds has a live process behind it.
        stale = (
            Job.objects.select_for_update(skip_locked=True)
            .filter(status=JobStatus.RUNNING)
            .alias(last_seen=Coalesce("heartbeat_at", "started_at", "created_at"))
            .filter(last_seen__lt=now - timedelta(seconds=stale_after))
            .order_by("pk")
        )
        for job in stale:
            last_seen = job.heartbeat_at or job.started_at or job.created_at
            lost = f"worker lost: no heartbeat since {last_seen:%Y-%m-%d %H:%M:%S} UTC"
            task = app.tasks.get(job.task_name) if job.task_name else None
            if task is not None and job.attempts < max_attempts:
                outcome = f"attempt {job.attempts}: {lost}; requeued"
                Job.objects.filter(pk=job.pk).update(
                    status=JobStatus.QUEUED,
                    error=outcome,
                    attempt_log=[*job.attempt_log, _attempt_entry(job, outcome)],
                )
                transaction.on_commit(lambda task=task, job_id=job.pk: _job_send(task, job_id))
                swept.requeued.append(job.pk)
            else:
                outcome = lost + (
                    f"; gave up after {job.attempts} attempts"
                    if task is not None
                    else "; it was not run by a queued task, so nothing can run it again"
                )
                Job.objects.filter(pk=job.pk).update(
                    status=JobStatus.FAILED,
                    error=outcome,
                    finished_at=now,
                    attempt_log=[*job.attempt_log, _attempt_entry(job, outcome)],
                )
                swept.failed.append(job.pk)
            logger.warning("job %s (%s): %s", job.pk, job.kind, outcome)
    return swept


def _job_send(task, job_id: int) -> None:
    """Send a requeued job's task; if the broker refuses it, the job goes back to running
    (and stale), for the next sweep to try again."""
    try:
        task.apply_async(args=[job_id])
    except Exception:
        logger.exception("job %s: could not send %s again", job_id, task.name)
        Job.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(status=JobStatus.RUNNING)
