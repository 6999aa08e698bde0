"""Celery tasks of the core: the scheduled sweep of jobs whose worker was lost."""

from celery import shared_task

from governance import services


@shared_task(name="governance.requeue_stale_jobs", time_limit=120, acks_late=True)
def requeue_stale_jobs() -> None:
    """Every minute (CELERY_BEAT_SCHEDULE): requeue or fail running jobs that stopped beating."""
    services.jobs_requeue_stale()
