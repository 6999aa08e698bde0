"""Analytics through the database: computed in a job after ingest, read by pages and the API."""

import csv
import io

import pytest

from governance.models import Job
from traces.analytics.models import AnalyticsResult
from traces.analytics.selectors import AnalyticsFilters

pytestmark = pytest.mark.django_db


def test_ingest_computes_the_default_analytics(corpus, workspace):
    corpus()
    stored = AnalyticsResult.objects.get(workspace=workspace, filter_key=AnalyticsFilters().key)
    workspace.refresh_from_db()
    assert stored.data_version == workspace.data_version
    result = stored.result
    assert result["calls"] > 1000 and result["sessions"] == 6
    assert result["cost_curve"]["fit"]["exponent"] > 2
    assert result["compactions"]["count"] >= 10
    measured = result["cycle_parameters"]
    assert (
        measured["usable"]
        and measured["optimum_ci"][0] <= measured["optimum_threshold"] <= measured["optimum_ci"][1]
    )
    assert result["cycle"]["model"]["optimum_threshold"] == pytest.approx(
        measured["optimum_threshold"]
    )
    assert result["coverage"]["repeats"] > 0 and 0 < result["coverage"]["asymptote"] <= 1
    assert result["incidents"]["total_tokens"] > 0
    assert Job.objects.filter(kind="trace_analytics", status="succeeded").exists()


def test_api_returns_numbers_or_202_with_the_job(corpus, api_for, run_on_commit):
    corpus()
    api = api_for("viewer")
    response = api.get("/api/v1/analytics/cost-curve/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["stale"] is False and body["n_calls"] > 1000
    assert body["result"]["fit"]["exponent"] > 2 and len(body["result"]["bands"]) == len(
        body["result"]["agents"]
    )
    for name in [
        "growth",
        "read-amplification",
        "steps",
        "compactions",
        "cycle-parameters",
        "reference-coverage",
        "incidents",
    ]:
        assert api.get(f"/api/v1/analytics/{name}/").status_code == 200, name
    with run_on_commit():
        filtered = api.get("/api/v1/analytics/growth/?task_type=building")
    assert filtered.status_code == 202 and filtered.json()["job_url"].startswith(
        "http://testserver/api/v1/jobs/"
    )
    again = api.get("/api/v1/analytics/growth/?task_type=building")
    assert again.status_code == 200 and again.json()["filters"]["task_type"] == "building"
    assert api.get("/api/v1/analytics/growth/?started_after=yesterday").status_code == 400


def test_calculator_api_reproduces_the_seed_and_rejects_bad_input(api_for):
    api = api_for("viewer")
    response = api.post(
        "/api/v1/analysis/compaction-cycle/",
        {
            "post_compaction_tokens": 65588,
            "growth_per_step": 1470,
            "summary_tokens": 4382,
            "penalty_steps": 28,
            "thresholds": [900000],
        },
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert round(body["optimum_threshold"]) == 219970 and round(body["within_10pct"][0]) == 167920
    assert round(body["floor_threshold"]) == 106748 and body["ratios"]["900000"] == pytest.approx(
        2.3163, abs=1e-3
    )
    assert len(body["curve"]) > 50
    for payload, field in [
        ({"growth_per_step": 0}, "growth_per_step"),
        ({"penalty_steps": -1}, "penalty_steps"),
        ({"thresholds": [60000]}, "thresholds"),
    ]:
        bad = api.post(
            "/api/v1/analysis/compaction-cycle/",
            {
                "post_compaction_tokens": 65588,
                "growth_per_step": 1470,
                "summary_tokens": 4382,
                "penalty_steps": 28,
                **payload,
            },
            format="json",
        )
        assert bad.status_code == 400 and field in bad.json(), payload


def test_pages_show_charts_with_n_and_method(corpus, client_for, workspace):
    corpus()
    client = client_for("viewer")
    for path, expected in [
        ("", "Cost grows as"),
        ("steps/", "single-directive subagents"),
        ("compactions/", "Compact at about"),
        ("coverage/", "repeat references"),
        ("incidents/", "Top consumers"),
    ]:
        page = client.get(f"/w/{workspace.slug}/analytics/{path}").content.decode()
        assert expected in page, path
        assert "calls ·" in page and "computed" in page
    page = client.get(f"/w/{workspace.slug}/analytics/compactions/").content.decode()
    assert "Percentile bootstrap" in page and "f(T) = [n(S+T)/2" in page
    data = client.get(f"/w/{workspace.slug}/analytics/data/cost-curve.csv").content.decode()
    rows = list(csv.reader(io.StringIO(data)))
    assert rows[0] == ["band", "median_cost", "agents"] and len(rows) > 5


def test_small_data_says_what_is_missing(client_for, workspace, run_on_commit):
    from traces.services import ingest_bytes
    from traces.synthetic import CorpusParams, generate_corpus

    generated = next(
        generate_corpus(
            CorpusParams(sessions=1, steps_per_session=(30, 30), subagents_per_session=(0, 0))
        )
    )
    with run_on_commit():
        ingest_bytes(
            workspace=workspace, name="one.jsonl", data=b"\n".join(generated.lines), source="demo"
        )
    page = client_for("viewer").get(f"/w/{workspace.slug}/analytics/compactions/").content.decode()
    assert "No compactions in this selection" in page
    assert "Only 0 compactions (fewer than 10): P, S and SUMM cannot be estimated." in page
    assert 'id="cycle"' not in page  # no misleading curve


def test_filters_without_a_result_offer_to_compute(corpus, client_for, workspace, run_on_commit):
    corpus()
    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/analytics/?harness=codex").content.decode()
    assert "No analytics for harness = codex yet" in page and "Compute now" in page
    with run_on_commit():
        response = client.post(f"/w/{workspace.slug}/analytics/", {"harness": "codex"})
    assert response.status_code == 302
    page = client.get(f"/w/{workspace.slug}/analytics/?harness=codex").content.decode()
    assert "No calls match these filters." in page or "0 calls" in page


def test_analytics_are_workspace_scoped(corpus, workspace, other_workspace, outsider, api_for):
    from rest_framework.test import APIClient

    from governance.services import api_token_create

    corpus()
    other = APIClient()
    other.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(workspace=other_workspace, user=outsider).plaintext}"
    )
    response = other.get("/api/v1/analytics/cost-curve/")
    assert (
        response.status_code == 202
    )  # nothing computed for the other workspace; never this one's numbers
    assert AnalyticsResult.objects.filter(workspace=other_workspace).count() <= 1
    stored = AnalyticsResult.objects.filter(workspace=other_workspace).first()
    if stored:
        assert stored.result["calls"] == 0
