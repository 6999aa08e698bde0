"""Celery tasks of the audit: each body is one service call, through job_run."""

from celery import shared_task

from governance.services import job_run
from traces.audit import services


@shared_task(name="audit.build_packets", time_limit=1800, acks_late=True)
def build_packets(job_id: int):
    job_run(job_id=job_id, work=services.audit_build_run)
