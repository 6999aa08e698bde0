"""Celery tasks for specs: each body is one call into a service, through job_run."""

from celery import shared_task

from governance.services import job_run
from specs import services


@shared_task(name="specs.survival_audit", time_limit=300, acks_late=True)
def survival_audit(job_id: int):
    job_run(job_id=job_id, work=services.survival_audit_job_run)
