"""A real Celery worker on the configured broker ingests an upload."""

import time

import pytest
from rest_framework.test import APIClient

from governance.services import api_token_create
from traces.models import Call

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def test_worker_ingests_an_api_upload(celery_worker, workspace, members, shared_fixtures):
    api = APIClient()
    api.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(workspace=workspace, user=members['editor']).plaintext}"
    )
    path = (
        shared_fixtures
        / "madshn__localpush__rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
    )
    with path.open("rb") as handle:
        response = api.post("/api/v1/trace-uploads/", {"files": [handle]}, format="multipart")
    assert response.status_code == 202
    assert response.json()["job"]["status"] == "queued"  # not run in the request
    url = response.json()["job_url"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = api.get(url).json()
        if job["status"] in {"succeeded", "failed"}:
            break
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    assert job["counts"]["calls"] == 81 and job["counts"]["duplicates_dropped"] == 80
    assert Call.objects.count() == 81
