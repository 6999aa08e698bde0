"""Thin Celery tasks for traces: each gets ids and calls one service."""

from celery import shared_task
from django.db import OperationalError

from governance.services import job_run
from traces import services


@shared_task(
    bind=True,
    name="traces.ingest_uploads",
    time_limit=4 * 3600,
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
)
def ingest_uploads(self, job_id: int) -> None:
    # A database error is retried (every write is idempotent): until the last attempt the
    # job goes back to the queue instead of failing.
    retrying = self.request.retries < self.max_retries
    job_run(
        job_id=job_id,
        work=services.trace_ingest_job_run,
        retry_on=(OperationalError,) if retrying else (),
    )


@shared_task(name="traces.derive_pending", time_limit=3600, acks_late=True)
def derive_pending(workspace_id: int) -> None:
    services.derive_pending_run(workspace_id=workspace_id)


@shared_task(name="traces.derive_pending_sweep", time_limit=60, acks_late=True)
def derive_pending_sweep() -> None:
    """Every 5 minutes (CELERY_BEAT_SCHEDULE): derive what a killed worker left marked."""
    services.derive_pending_queue_all()
