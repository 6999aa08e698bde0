"""Thin Celery task for trace analytics."""

from celery import shared_task

from governance.services import job_run
from traces.analytics import (
    instruction_visibility_extracts,
    instruction_visibility_services,
    services,
)


@shared_task(name="traces.compute_analytics", time_limit=1800, acks_late=True)
def compute_analytics(job_id: int) -> None:
    job_run(job_id=job_id, work=services.analytics_job_run)


@shared_task(name="analytics.instruction_visibility", time_limit=3600, acks_late=True)
def count_instruction_visibility(job_id: int) -> None:
    job_run(job_id=job_id, work=instruction_visibility_services.instruction_visibility_job_run)


@shared_task(
    name=instruction_visibility_extracts.TASK, time_limit=3600, acks_late=True, ignore_result=True
)
def extract_instruction_visibility_texts(workspace_id: int, session_ids: list[int]) -> None:
    """A cache filled after derive (no job row: see `instruction_visibility_extracts`)."""
    instruction_visibility_extracts.extracts_store(
        workspace_id=workspace_id, session_ids=session_ids
    )
