"""The jobs API filters and sorts with the jobs page's FilterSet: same names, same choices."""

import pytest

from governance.models import Job, JobStatus
from governance.services import job_create

pytestmark = pytest.mark.django_db


def _job(workspace, kind, status, label):
    job = job_create(workspace=workspace, kind=kind, label=label)
    Job.objects.filter(pk=job.pk).update(status=status)
    return job


def test_jobs_api_filters_by_kind_status_and_text_and_sorts_like_the_page(workspace, api_for):
    upload = _job(workspace, "trace_ingest", JobStatus.FAILED, "Upload of run-17.jsonl")
    _job(workspace, "trace_ingest", JobStatus.SUCCEEDED, "Upload of run-18.jsonl")
    analysis = _job(workspace, "qualification_analysis", JobStatus.FAILED, "Analyse sweep A")
    client = api_for("viewer")

    def ids(query):
        response = client.get(f"/api/v1/jobs/?{query}")
        assert response.status_code == 200, response.json()
        return [row["id"] for row in response.json()["results"]]

    assert ids("kind=trace_ingest&status=failed") == [upload.pk]
    assert ids("q=RUN-17") == [upload.pk]
    assert ids("status=failed&sort=kind") == [analysis.pk, upload.pk]
    assert ids("status=failed&sort=-kind") == [upload.pk, analysis.pk]
    refused = client.get("/api/v1/jobs/?status=exploded")
    assert refused.status_code == 400 and "status" in refused.json()
