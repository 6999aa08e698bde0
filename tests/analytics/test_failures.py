"""An analysis that cannot be computed says why in place; the others still render, and a
computation that failed on the current traces is not queued again by reading."""

import pytest
from django.core.management import call_command

from governance.models import Job, JobStatus
from governance.services import job_create, workspace_bump_data_version
from traces.analytics.models import AnalyticsResult
from traces.analytics.selectors import AnalyticsFilters
from traces.analytics.services import JOB_KIND
from traces.synthetic import CorpusParams, generate_corpus

pytestmark = pytest.mark.django_db

NOT_MEASURABLE = "P is not measurable: no excess ingestion after compactions"
# After each compaction the agent takes in 0.3× its usual growth for 25 steps: the
# measured rediscovery penalty P comes out negative.
LESS_AFTER_COMPACTIONS = {"rediscovery_factor": 0.3}


def analytics_jobs(workspace) -> int:
    return Job.objects.filter(workspace=workspace, kind=JOB_KIND).count()


def test_a_negative_penalty_fails_only_the_cycle_model_and_says_why(
    corpus, workspace, client_for, api_for
):
    corpus(**LESS_AFTER_COMPACTIONS)
    jobs = analytics_jobs(workspace)
    stored = AnalyticsResult.objects.get(workspace=workspace, filter_key=AnalyticsFilters().key)
    assert stored.result["cycle_parameters"]["penalty_steps"]["value"] < 0
    assert stored.result["failures"]["cycle"].startswith(NOT_MEASURABLE)

    api = api_for("viewer")
    cost = api.get("/api/v1/analytics/cost-curve/")
    assert cost.status_code == 200 and cost.json()["status"] == "ok"
    assert cost.json()["result"]["fit"]["exponent"] > 2
    cycle = api.get("/api/v1/analytics/cycle-parameters/")
    body = cycle.json()
    assert cycle.status_code == 200 and body["status"] == "ok"
    assert body["result"]["cycle"] is None
    assert body["failures"]["cycle"].startswith(NOT_MEASURABLE)
    assert body["result"]["cycle_parameters"]["post_compaction"]["value"] > 0
    assert body["result"]["task_types"]  # the per-type table is still there
    for name in ["growth", "steps", "compactions", "reference-coverage", "incidents"]:
        response = api.get(f"/api/v1/analytics/{name}/")
        assert response.status_code == 200 and response.json()["status"] == "ok", name

    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/analytics/compactions/").content.decode()
    assert "Cost-optimal compaction threshold" in page and NOT_MEASURABLE in page
    assert "Median after ÷ before" in page and "Thresholds by task type" in page
    assert 'id="cycle"' not in page
    assert "Cost grows as" in client.get(f"/w/{workspace.slug}/analytics/").content.decode()
    what_if = client.get(f"/w/{workspace.slug}/analytics/what-if/").content.decode()
    assert "seed 001&#x27;s published values" in what_if or "seed 001's published" in what_if
    # Reading again queues nothing: the result is current.
    api.get("/api/v1/analytics/cycle-parameters/")
    client.get(f"/w/{workspace.slug}/analytics/compactions/")
    assert analytics_jobs(workspace) == jobs


def test_the_cli_prints_no_traceback_when_an_analysis_cannot_be_computed(
    workspace, tmp_path, run_on_commit, capfd, caplog
):
    params = CorpusParams(
        sessions=6,
        seed=12,
        steps_per_session=(150, 260),
        threshold=150_000,
        **LESS_AFTER_COMPACTIONS,
    )
    for generated in generate_corpus(params):
        (tmp_path / f"{generated.session_id}.jsonl").write_bytes(b"\n".join(generated.lines))
    capfd.readouterr()
    with run_on_commit():
        call_command("ingest_traces", str(tmp_path), "--workspace", workspace.slug)
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "new calls in 6 new sessions" in out
    # What the console handler would print as a traceback: a record carrying exc_info.
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    job = Job.objects.get(workspace=workspace, kind=JOB_KIND)
    assert job.status == JobStatus.SUCCEEDED
    assert job.counts["failed_sections"] == ["cycle"]


def failed_job(workspace, filters: AnalyticsFilters, version: int) -> Job:
    job = job_create(
        workspace=workspace,
        kind=JOB_KIND,
        params={"filters": filters.as_dict(), "key": filters.key, "data_version": version},
    )
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.FAILED,
        counts={"data_version": version},
        error="MemoryError: the worker ran out of memory\nTraceback (most recent call last): …",
    )
    return job


def test_a_failed_computation_is_reported_and_not_requeued_by_reading(
    workspace, api_for, client_for, run_on_commit
):
    workspace_bump_data_version(workspace=workspace)
    workspace.refresh_from_db()
    filters = AnalyticsFilters(harness="codex")
    job = failed_job(workspace, filters, workspace.data_version)
    api = api_for("viewer")
    for _ in range(2):
        response = api.get("/api/v1/analytics/growth/?harness=codex")
        body = response.json()
        assert response.status_code == 500 and body["status"] == "failed"
        assert body["error"] == "MemoryError: the worker ran out of memory"
        assert body["job_url"].endswith(f"/api/v1/jobs/{job.pk}/")
        assert "POST" in body["detail"]
    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/analytics/?harness=codex").content.decode()
    assert "failed: MemoryError: the worker ran out of memory" in page
    assert "It is not retried on its own" in page and "Compute again" in page
    assert "Traceback" not in page
    assert analytics_jobs(workspace) == 1
    # Asking explicitly computes again, from the page or the API.
    with run_on_commit():
        retried = api.post("/api/v1/analytics/growth/?harness=codex")
    assert retried.status_code == 202 and analytics_jobs(workspace) == 2
    assert api.get("/api/v1/analytics/growth/?harness=codex").json()["status"] == "ok"
    # New traces, and computing them failed: the older figures, with the failure.
    workspace_bump_data_version(workspace=workspace)
    workspace.refresh_from_db()
    failed_job(workspace, filters, workspace.data_version)
    response = api.get("/api/v1/analytics/growth/?harness=codex")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "ok" and body["stale"] is True
    assert body["error"] == "MemoryError: the worker ran out of memory"
    page = client.get(f"/w/{workspace.slug}/analytics/?harness=codex").content.decode()
    assert "The figures below are from earlier traces" in page and "0 calls" in page
    assert analytics_jobs(workspace) == 3
    # Newer traces still: a failure on the older ones no longer holds a read back.
    workspace_bump_data_version(workspace=workspace)
    response = api.get("/api/v1/analytics/growth/?harness=codex")
    assert response.status_code == 200 and "error" not in response.json()
    assert analytics_jobs(workspace) == 4


def test_a_section_that_raises_fails_alone_and_those_that_need_it_say_so():
    from traces.analytics.services import run_sections

    logged = []
    values, failures = run_sections(
        [
            ("counts", "the counts", lambda done: 41 + 1, ()),
            ("ratio", "the ratio", lambda done: done["counts"] / 0, ("counts",)),
            ("chart", "the chart", lambda done: [done["ratio"]], ("ratio",)),
            ("other", "the other", lambda done: done["counts"] * 2, ("counts",)),
        ],
        on_error=lambda key, text: logged.append((key, text)),
    )
    assert values == {"counts": 42, "ratio": None, "chart": None, "other": 84}
    assert failures == {
        "ratio": "The ratio could not be computed (ZeroDivisionError: division by zero).",
        "chart": "The chart needs the ratio, which could not be computed.",
    }
    assert [key for key, _ in logged] == ["ratio"] and "Traceback" in logged[0][1]
