"""Thin Celery tasks for traces: each gets ids and calls one service."""

from celery import shared_task
from django.db import OperationalError

from governance.services import job_run
from traces import services


@shared_task(
    name="traces.ingest_uploads",
    time_limit=4 * 3600,
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
)
def ingest_uploads(job_id: int) -> None:
    job_run(job_id=job_id, work=services.trace_ingest_job_run)


@shared_task(name="traces.derive_pending", time_limit=3600, acks_late=True)
def derive_pending(workspace_id: int) -> None:
    services.derive_pending_run(workspace_id=workspace_id)
