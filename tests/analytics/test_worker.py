"""On a real Celery worker: an upload is ingested on the ingest queue, which queues the
analytics on the analysis queue, whose result is cached for the new data version."""

import time

import pytest
from celery.signals import task_prerun
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from governance.services import api_token_create
from traces.analytics.models import AnalyticsResult
from traces.analytics.selectors import AnalyticsFilters
from traces.models import Call
from traces.synthetic import CorpusParams, generate_corpus

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def test_upload_then_analytics_on_the_analysis_queue(celery_worker, workspace, members):
    seen = []

    def record(task=None, **_):
        seen.append((task.name, (task.request.delivery_info or {}).get("routing_key")))

    task_prerun.connect(record, weak=False)
    try:
        api = APIClient()
        api.credentials(
            HTTP_AUTHORIZATION=f"Bearer {api_token_create(workspace=workspace, user=members['editor']).plaintext}"
        )
        files = [
            SimpleUploadedFile(f"{g.session_id}.jsonl", b"\n".join(g.lines) + b"\n")
            for g in generate_corpus(CorpusParams(sessions=3, seed=5, steps_per_session=(120, 160)))
        ]
        response = api.post("/api/v1/trace-uploads/", {"files": files}, format="multipart")
        assert response.status_code == 202  # ingested by the worker, not in the request
        key = AnalyticsFilters().key
        deadline = time.monotonic() + 90
        stored = None
        while time.monotonic() < deadline:
            workspace.refresh_from_db(fields=["data_version"])
            stored = AnalyticsResult.objects.filter(workspace=workspace, filter_key=key).first()
            if stored and stored.data_version == workspace.data_version > 0:
                break
            time.sleep(0.3)
    finally:
        task_prerun.disconnect(record)
    assert stored is not None, seen
    assert stored.data_version == workspace.data_version == 1
    assert stored.result["calls"] == Call.objects.filter(workspace=workspace).count() > 300
    assert stored.result["sessions"] == 3
    assert stored.job is not None and stored.job.status == "succeeded"
    assert stored.job.counts["data_version"] == 1
    # Ingest on its queue; the analytics job and the after-ingest extracts on theirs.
    analysis = {"traces.compute_analytics", "analytics.instruction_visibility_extract"}
    assert {name for name, _ in seen} >= {"traces.ingest_uploads", "traces.compute_analytics"}
    for name, queue in seen:
        assert queue == ("analysis" if name in analysis else "ingest"), (name, queue)
    # The page reads the cached result without computing.
    response = api.get("/api/v1/analytics/cost-curve/")
    assert response.status_code == 200 and response.json()["stale"] is False
    assert response.json()["n_calls"] == stored.result["calls"]
