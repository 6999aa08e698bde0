"""Analytics through the database: computed in a job after ingest, read by pages and the API."""

import csv
import io

import pytest

from governance.models import Job
from traces.analysis.cycle import CycleParams, cost_per_step, optimum
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
    with run_on_commit():
        assert api.get("/api/v1/analytics/cost-curve/?exclude_forks=true").status_code == 202
    no_forks = api.get("/api/v1/analytics/cost-curve/?exclude_forks=true").json()
    assert no_forks["filters"]["exclude_forks"] is True
    assert 0 < no_forks["n_calls"] <= body["n_calls"]


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


SEED_BODY = {
    "post_compaction_tokens": 65588,
    "growth_per_step": 1470,
    "summary_tokens": 4382,
    "penalty_steps": 28,
}


def test_calculator_reports_a_below_floor_threshold_instead_of_failing(api_for):
    # 100,000 is above S (65,588) but below the floor S + P·D = 106,748: f(T) is undefined.
    response = api_for("viewer").post(
        "/api/v1/analysis/compaction-cycle/",
        {**SEED_BODY, "thresholds": [100000, 600000]},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["ratios"]["100000"] is None
    assert body["ratios"]["600000"] == pytest.approx(1.6611, abs=1e-4)
    below, above = body["at_thresholds"]
    assert below == {
        "threshold": 100000,
        "cost_per_step": None,
        "ratio": None,
        "below_floor": True,
        "reason": "below floor: T = 100,000 is at or below S + P·D = 106,748, where the cycle "
        "returns no productive work, so f(T) is undefined.",
        # the cycle exists above S: n = 34,412 / 1,470 = 23.41 steps, every one of them
        # inside the default 30-step disruption
        "steps_per_cycle": 23.41,
        "mean_window": 82_794.0,
        "degraded_share": 1.0,
    }
    assert above["below_floor"] is False and above["ratio"] == body["ratios"]["600000"]
    assert above["cost_per_step"] == pytest.approx(367_838.7, abs=0.1)  # f(T*) = 221,440


def test_calculator_keys_ratios_by_exact_integer_thresholds(api_for):
    response = api_for("viewer").post(
        "/api/v1/analysis/compaction-cycle/",
        {**SEED_BODY, "thresholds": [1000000, 1234567, 1234568]},
        format="json",
    )
    assert response.status_code == 200
    ratios = response.json()["ratios"]
    assert list(ratios) == ["1000000", "1234567", "1234568"]
    assert ratios["1000000"] == pytest.approx(2.538, abs=1e-4)
    assert [r["threshold"] for r in response.json()["at_thresholds"]] == [1000000, 1234567, 1234568]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"penalty_steps": 1e308}, "penalty_steps"),
        ({"growth_per_step": 1e308}, "growth_per_step"),
        ({"post_compaction_tokens": 1e300}, "post_compaction_tokens"),
        ({"summary_tokens": 1e200}, "summary_tokens"),
        ({"thresholds": [1e308]}, "thresholds"),
        ({"thresholds": [200000000]}, "thresholds"),
        ({"thresholds": [250000.5]}, "thresholds"),
        ({"points": 10**9}, "points"),
    ],
)
def test_calculator_refuses_absurd_numbers_naming_the_field(api_for, payload, field):
    response = api_for("viewer").post(
        "/api/v1/analysis/compaction-cycle/", {**SEED_BODY, **payload}, format="json"
    )
    assert response.status_code == 400 and list(response.json()) == [field], response.json()


def test_what_if_says_below_floor_and_refuses_absurd_input(client_for, workspace):
    client = client_for("viewer")
    page = client.get(
        f"/w/{workspace.slug}/analytics/what-if/?compare_low=100000&compare_high=600000"
    ).content.decode()
    assert "below floor</span>" in page and "inf×" not in page
    assert "T = 100,000 is at or below S + P·D = 106,748" in page
    assert "1.66×" in page  # f(600k) ÷ f(T*) beside it, to three significant figures
    page = client.get(
        f"/w/{workspace.slug}/analytics/what-if/?penalty_steps=1e308"
    ).content.decode()
    assert "penalty_steps: Ensure this value is less than or equal to 100000" in page
    assert 'id="what-if-chart"' not in page


def test_what_if_charts_offer_their_data_as_csv(client_for, workspace):
    client = client_for("viewer")
    base = f"/w/{workspace.slug}/analytics/what-if/"
    page = client.get(base).content.decode()
    assert 'href="data/what-if-curve.csv?post_compaction_tokens=65588&amp;' in page
    assert 'href="data/what-if-sensitivity.csv?' in page
    query = "post_compaction_tokens=65588&growth_per_step=1470&summary_tokens=4382&penalty_steps=28&tail_tokens=60000&tail_penalty_steps=14"
    rows = list(
        csv.reader(
            io.StringIO(client.get(f"{base}data/what-if-sensitivity.csv?{query}").content.decode())
        )
    )
    assert rows[0] == ["penalty_steps", "optimum_threshold", "optimum_cost_per_step", "within_10pct_low", "within_10pct_high", "floor_threshold"]  # fmt: skip
    by_p = {float(r[0]): [float(v) for v in r[1:]] for r in rows[1:]}
    assert by_p[28.0][0] == pytest.approx(219_970, abs=1)
    assert by_p[28.0][2:4] == [pytest.approx(167_921, abs=1.5), pytest.approx(316_308, abs=1.5)]
    assert by_p[55.0][0] == pytest.approx(314_341, abs=1)
    rows = list(
        csv.reader(
            io.StringIO(client.get(f"{base}data/what-if-curve.csv?{query}").content.decode())
        )
    )
    assert rows[0] == ["scenario", "S", "D", "SUMM", "P", "threshold", "cost_per_step"]
    plain = [r for r in rows[1:] if r[0] == "plain"]
    tail = [r for r in rows[1:] if r[0] == "preserved tail"]
    assert len(plain) > 100 and len(tail) > 100 and len(plain) + len(tail) == len(rows) - 1
    assert [float(v) for v in tail[0][1:5]] == [125_588, 1_470, 4_382, 14]
    for row in (plain[0], plain[-1], tail[len(tail) // 2]):
        s, d, summ, p, t, f = (float(v) for v in row[1:])
        assert f == pytest.approx(float(cost_per_step(t, CycleParams(s, d, summ, p))), abs=0.1)
    bad = client.get(f"{base}data/what-if-curve.csv?penalty_steps=1e308")
    assert bad.status_code == 400 and b"penalty_steps" in bad.content


def test_cycle_and_sensitivity_state_n_method_filters_and_offer_csv(corpus, client_for, workspace):
    corpus()
    client = client_for("viewer")
    result = AnalyticsResult.objects.get(
        workspace=workspace, filter_key=AnalyticsFilters().key
    ).result
    m, cycle = result["cycle_parameters"], result["cycle"]
    page = client.get(f"/w/{workspace.slug}/analytics/compactions/").content.decode()
    assert (
        f"n = {m['compactions']} compactions (S from {m['post_compaction']['n']}, SUMM from "
        f"{m['summary']['n']}, P from {m['penalty_steps']['n']}) and "
        f"{m['growth_per_step']['n']:,} steps from 200,000 tokens up (D). Method: f(T) = "
    ) in page
    assert f"evaluated at {len(cycle['model']['curve'])} thresholds from the floor" in page
    assert "held fixed while P takes 12 values" in page and "Method: closed-form T*" in page
    assert page.count("Filters: all traces.") >= 5
    assert f"rule: {m['bootstrap_rule']}" in page and m["bootstrap"] == 1000
    assert 'href="data/cycle-curve.csv?' in page and 'href="data/sensitivity.csv?' in page
    rows = list(
        csv.reader(
            io.StringIO(
                client.get(
                    f"/w/{workspace.slug}/analytics/compactions/data/cycle-curve.csv"
                ).content.decode()
            )
        )
    )
    plain = [r for r in rows[1:] if r[0] == "plain"]
    tail = [r for r in rows[1:] if r[0] == "preserved tail"]
    assert len(plain) == len(cycle["model"]["curve"]) and len(tail) == len(
        cycle["tail"]["model"]["curve"]
    )
    assert [float(v) for v in plain[0][5:]] == cycle["model"]["curve"][0]
    params = cycle["params"]
    assert float(tail[0][1]) == pytest.approx(params["post_compaction"] + 60_000)
    assert float(tail[0][4]) == pytest.approx(params["penalty_steps"] / 2)
    rows = list(
        csv.reader(
            io.StringIO(
                client.get(f"/w/{workspace.slug}/analytics/data/sensitivity.csv").content.decode()
            )
        )
    )
    assert [float(r[0]) for r in rows[1:]] == [0, 10, 20, 28, 40, 55, 65, 80, 100, 113, 138, 145]
    p55 = next(r for r in rows[1:] if float(r[0]) == 55)
    expected = optimum(CycleParams(params["post_compaction"], params["growth_per_step"], params["summary"], 55))  # fmt: skip
    assert float(p55[1]) == pytest.approx(expected, rel=1e-9)
    for path in ("", "steps/", "coverage/", "incidents/"):
        page = client.get(f"/w/{workspace.slug}/analytics/{path}").content.decode()
        assert "Filters: all traces" in page, path


def test_compactions_page_shows_both_preserved_fractions(corpus, client_for, workspace):
    corpus()
    s = AnalyticsResult.objects.get(workspace=workspace, filter_key=AnalyticsFilters().key).result["compactions"]  # fmt: skip
    # The generated corpus plants a 4,400-token summary and a ~60k landing from ~150k.
    assert 0.02 < s["median_preserved"] < 0.04 < 0.3 < s["median_post_share"] < 0.5
    page = client_for("viewer").get(f"/w/{workspace.slug}/analytics/compactions/").content.decode()
    assert f"Median preserved (summary ÷ before)</dt><dd>{100 * s['median_preserved']:.1f}%" in page
    assert f"Median after ÷ before</dt><dd>{100 * s['median_post_share']:.1f}%" in page


def test_filtered_captions_name_the_filters(corpus, client_for, workspace, run_on_commit):
    corpus()
    client = client_for("viewer")
    with run_on_commit():
        client.post(f"/w/{workspace.slug}/analytics/", {"task_type": "building"})
    page = client.get(
        f"/w/{workspace.slug}/analytics/compactions/?task_type=building"
    ).content.decode()
    assert "Filters: task type = building." in page and "Filters: all traces" not in page


def test_small_data_gates_coverage_steps_and_incidents(client_for, workspace, run_on_commit):
    from traces.services import ingest_bytes
    from traces.synthetic import CorpusParams, generate_corpus

    generated = next(generate_corpus(CorpusParams(sessions=1, steps_per_session=(30, 30), subagents_per_session=(0, 0))))  # fmt: skip
    with run_on_commit():
        ingest_bytes(workspace=workspace, name="one.jsonl", data=b"\n".join(generated.lines), source="demo")  # fmt: skip
    result = AnalyticsResult.objects.get(
        workspace=workspace, filter_key=AnalyticsFilters().key
    ).result
    client = client_for("viewer")
    repeats = result["coverage"]["repeats"]
    assert 0 < repeats < 30 and result["coverage"]["coverage"] == []
    assert result["coverage"]["asymptote"] is None
    page = client.get(f"/w/{workspace.slug}/analytics/coverage/").content.decode()
    assert (
        f"Only {repeats} repeat references (fewer than 30): coverage and its asymptote cannot be estimated."
        in page
    )
    assert 'id="coverage"' not in page and "Asymptote" not in page
    page = client.get(f"/w/{workspace.slug}/analytics/steps/").content.decode()
    assert "Only 1 agent (fewer than 10): no distribution of steps." in page
    assert (
        "Main threads (1) and subagents (0) each number fewer than 10 agents: "
        "no distribution is drawn." in page
    )
    assert 'id="steps"' not in page and result["steps"]["all"]["median"] is None
    page = client.get(f"/w/{workspace.slug}/analytics/incidents/").content.decode()
    assert "Only 1 agent (fewer than 5): too few to say who dominated the spend" in page
    assert 'id="incidents"' not in page and result["incidents"]["top_share"] is None
    assert "No subagent started above 100k." in page
    rows = list(
        csv.reader(
            io.StringIO(
                client.get(
                    f"/w/{workspace.slug}/analytics/data/reference-coverage.csv"
                ).content.decode()
            )
        )
    )
    assert rows == [["window", "coverage"]]


def test_fork_bound_parameter_flags_subagents_above_it(corpus, workspace):
    from traces.analytics.services import analytics_compute
    from traces.models import Agent

    corpus()
    starts = sorted(
        Agent.objects.filter(workspace=workspace, kind="subagent").values_list(
            "initial_context", flat=True
        )
    )
    flagged_counts = []
    for bound in (starts[len(starts) // 4], starts[len(starts) // 2]):
        result = analytics_compute(workspace=workspace, filters=AnalyticsFilters(fork_bound=bound))
        flagged = result["incidents"]["forked"]
        expected = set(
            Agent.objects.filter(
                workspace=workspace, kind="subagent", initial_context__gt=bound
            ).values_list("pk", flat=True)
        )
        assert expected and {row["agent"] for row in flagged} == expected, bound
        assert result["incidents"]["fork_bound"] == bound
        flagged_counts.append(len(flagged))
    assert flagged_counts[0] > flagged_counts[1]


def test_what_if_exchange_rate_shows_its_units_and_both_consistent_variants(client_for, workspace):
    page = (
        client_for("viewer")
        .get(
            f"/w/{workspace.slug}/analytics/what-if/?post_compaction_tokens=65588&growth_per_step=1470"
            "&summary_tokens=4382&penalty_steps=31&compare_low=232000&compare_high=600000"
        )
        .content.decode()
    )
    assert "units: tokens per 1,000 productive steps ÷ compactions per 1,000 total steps" in page
    assert "counting both per 1,000 productive steps" in page
    assert "counting both per 1,000 total steps" in page
