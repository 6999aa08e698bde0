"""Queueing analytics: a computation running on old data never absorbs a refresh."""

import pytest

from governance.models import Job, JobStatus
from governance.services import workspace_bump_data_version
from traces.analytics import services
from traces.analytics.models import AnalyticsResult
from traces.analytics.selectors import AnalyticsFilters
from traces.analytics.services import JOB_KIND, analytics_refresh_queue

pytestmark = pytest.mark.django_db


def current_version(workspace) -> int:
    workspace.refresh_from_db(fields=["data_version"])
    return workspace.data_version


def test_queued_and_current_jobs_are_reused_a_job_on_old_data_is_not(workspace):
    # No on_commit callbacks run here, so jobs stay queued: only the bookkeeping is tested.
    first = analytics_refresh_queue(workspace=workspace)
    version = current_version(workspace)
    assert first.status == JobStatus.QUEUED and first.params["data_version"] == version
    assert analytics_refresh_queue(workspace=workspace).pk == first.pk  # queued: reads later
    Job.objects.filter(pk=first.pk).update(
        status=JobStatus.RUNNING, counts={"data_version": version}
    )
    assert analytics_refresh_queue(workspace=workspace).pk == first.pk  # running on this data
    workspace_bump_data_version(workspace=workspace)  # an ingest finishes meanwhile
    second = analytics_refresh_queue(workspace=workspace)
    assert second.pk != first.pk and second.status == JobStatus.QUEUED
    assert second.params["data_version"] == version + 1
    assert analytics_refresh_queue(workspace=workspace).pk == second.pk
    # A running job that has not recorded its version yet is not trusted either.
    Job.objects.filter(pk=second.pk).update(status=JobStatus.RUNNING, counts={})
    assert analytics_refresh_queue(workspace=workspace).pk not in (first.pk, second.pk)
    # Other filters have their own jobs.
    other = analytics_refresh_queue(workspace=workspace, filters=AnalyticsFilters(harness="codex"))
    assert other.params["key"] == AnalyticsFilters(harness="codex").key


@pytest.mark.parametrize("ingest_queues", [True, False], ids=["ingest-queues", "bump-only"])
def test_traces_changing_during_a_computation_are_computed_next(
    corpus, workspace, run_on_commit, monkeypatch, ingest_queues
):
    corpus()
    before = current_version(workspace)
    real = services.analytics_compute
    landed = []

    def compute_while_an_ingest_lands(**kwargs):
        result = real(**kwargs)
        if not landed:  # once: the first computation read `before`, then traces change
            landed.append(True)
            workspace_bump_data_version(workspace=workspace)
            if ingest_queues:
                analytics_refresh_queue(workspace=workspace)  # as an ingest does
        return result

    monkeypatch.setattr(services, "analytics_compute", compute_while_an_ingest_lands)
    with run_on_commit():
        first = analytics_refresh_queue(workspace=workspace)
    first.refresh_from_db()
    assert first.status == JobStatus.SUCCEEDED and first.counts["data_version"] == before
    later = Job.objects.filter(workspace=workspace, kind=JOB_KIND, pk__gt=first.pk)
    assert later.count() == 1  # exactly one follow-up, however the change was announced
    followup = later.get()
    assert followup.status == JobStatus.SUCCEEDED
    assert followup.counts["data_version"] == before + 1 == current_version(workspace)
    assert first.counts["followup_job"] == followup.pk
    stored = AnalyticsResult.objects.get(workspace=workspace, filter_key=AnalyticsFilters().key)
    assert stored.data_version == before + 1 and stored.job_id == followup.pk
