"""Celery tasks for artifacts: the scheduled purge of expired and deleted content."""

from __future__ import annotations

from celery import shared_task

from artifacts import services
from governance.celery import app

PURGE_TASK = "artifacts.purge"
PURGE_EVERY_SECONDS = 15 * 60


@shared_task(name=PURGE_TASK, time_limit=1800, acks_late=True)
def purge_artifacts() -> dict:
    """Expire artifacts past their date and remove gone content from storage."""
    report = services.artifacts_purge()
    return {
        "expired": report.expired,
        "purged": report.purged,
        "stale_staging": report.stale_staging,
        "failed": len(report.failed),
    }


def register_schedule(celery_app=app) -> str:
    """Add the purge to celery beat's schedule (settings stay untouched)."""
    return celery_app.add_periodic_task(
        PURGE_EVERY_SECONDS, purge_artifacts.s(), name=PURGE_TASK, queue="maintenance"
    )


register_schedule()
