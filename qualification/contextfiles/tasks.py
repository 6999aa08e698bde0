"""Celery tasks for context files: each body is one call into a service."""

from celery import shared_task

from governance.services import job_run
from qualification.contextfiles import services


@shared_task(name="contextfiles.drift_check", time_limit=600, acks_late=True)
def run_drift_check(job_id: int):
    job_run(job_id=job_id, work=services.drift_check_run)
