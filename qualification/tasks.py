"""Celery tasks: each body is one call into a service, through job_run for progress and errors."""

from celery import shared_task

from governance.services import job_run
from qualification import services


@shared_task(name="qualification.load_trials", time_limit=1800, acks_late=True)
def load_trials(job_id: int):
    job_run(job_id=job_id, work=services.trial_upload_process)


@shared_task(name="qualification.analyse", time_limit=600, acks_late=True)
def analyse_qualification(job_id: int):
    job_run(job_id=job_id, work=services.qualification_analysis_run)
