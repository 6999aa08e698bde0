"""The cycle calculator API per threshold (mean window, steps per cycle, degraded share),
with a preserved tail and fixed scenarios (seed 001 §7.3, §8.1), and where L comes from."""

import csv
import io

import pytest

from tests.analytics.planted_post_compaction import plant
from traces.analytics.selectors import AnalyticsFilters
from traces.analytics.services import analytics_refresh_queue, analytics_store
from traces.services import ingest_bytes

pytestmark = pytest.mark.django_db

URL = "/api/v1/analysis/compaction-cycle/"
SEED_BODY = {
    "post_compaction_tokens": 65588,
    "growth_per_step": 1470,
    "summary_tokens": 4382,
    "penalty_steps": 28,
}
PRESET_8_1 = [
    {"name": "600k, bare digest", "threshold": 600000, "preserved_tail_tokens": 0, "penalty_steps": 28},
    {"name": "350k, 60k preserved tail", "threshold": 350000, "preserved_tail_tokens": 60000, "penalty_steps": 14},
]  # fmt: skip


def post(api, **body):
    return api.post(URL, {**SEED_BODY, **body}, format="json")


def test_seed_degraded_share_per_threshold_with_the_default_length(api_for):
    response = post(api_for("viewer"), thresholds=[220000, 577000])
    assert response.status_code == 200
    body = response.json()
    # no behaviour-after-compaction result in this workspace: the seed's 30, and why
    assert body["disruption"]["steps"] == 30 and body["disruption"]["source"] == "default"
    assert body["disruption"]["label"].startswith("default 30 (seed 001 §7.3): the behaviour")
    at_220k, at_577k = body["at_thresholds"]
    assert (at_220k["steps_per_cycle"], at_220k["mean_window"]) == (105.04, 142794.0)
    assert at_220k["degraded_share"] == pytest.approx(30 / 105.04, abs=1e-4)  # the seed's 29%
    assert round(at_577k["steps_per_cycle"]) == 348 and round(at_577k["degraded_share"], 2) == 0.09
    # the fields that were there before are unchanged
    assert round(body["optimum_threshold"]) == 219970 and body["ratios"]["577000"] == pytest.approx(
        at_577k["cost_per_step"] / body["optimum_cost_per_step"], abs=1e-4
    )
    assert body["post_compaction_tokens"] == 65588 and body["preserved_tail_tokens"] == 0
    assert body["scenarios"] is None


def test_given_disruption_length_and_preserved_tail(api_for):
    body = post(
        api_for("viewer"),
        thresholds=[350000],
        preserved_tail_tokens=60000,
        penalty_steps=14,
        disruption_steps=55,
    ).json()
    assert body["disruption"] == {"steps": 55, "source": "given", "label": "given, 55 steps"}
    assert body["post_compaction_tokens"] == 125588 and body["preserved_tail_tokens"] == 60000
    (row,) = body["at_thresholds"]
    # S = 125,588: n = 224,412 / 1,470 = 152.66; mean window (125,588 + 350,000) / 2
    assert (row["steps_per_cycle"], row["mean_window"]) == (152.66, 237794.0)
    assert row["degraded_share"] == pytest.approx(55 / 152.66, abs=1e-4)
    assert round(row["cost_per_step"]) == 277039
    assert round(body["floor_threshold"]) == 125588 + 14 * 1470


def test_section_8_1_scenarios_reproduce_the_seed(api_for):
    body = post(api_for("viewer"), scenarios=PRESET_8_1).json()
    bare, tail = body["scenarios"]
    assert (bare["name"], bare["cost_per_step"], bare["saving_vs_first"]) == (
        "600k, bare digest",
        367838.7,
        0,
    )
    assert tail["post_compaction_tokens"] == 125588 and tail["penalty_steps"] == 14
    assert tail["saving_vs_first"] == pytest.approx(0.2468, abs=1e-4)  # the seed's "25% less"
    assert (bare["mean_window"], tail["mean_window"]) == (332794.0, 237794.0)
    assert (bare["degraded_share"], tail["degraded_share"]) == (
        pytest.approx(30 / 363.55, abs=1e-4),
        pytest.approx(30 / 152.66, abs=1e-4),
    )
    # a scenario's own L overrides the request's
    own = post(
        api_for("viewer"),
        disruption_steps=10,
        scenarios=[{**PRESET_8_1[0]}, {**PRESET_8_1[1], "disruption_steps": 0}],
    ).json()["scenarios"]
    assert (own[0]["disruption_steps"], own[1]["disruption_steps"]) == (10, 0)
    assert own[1]["degraded_share"] == 0


@pytest.mark.parametrize(
    ("payload", "field", "says"),
    [
        ({"disruption_steps": -1}, "disruption_steps", "greater than or equal to 0"),
        ({"disruption_steps": "soon"}, "disruption_steps", "valid number"),
        ({"preserved_tail_tokens": -5}, "preserved_tail_tokens", "greater than or equal to 0"),
        (
            {"preserved_tail_tokens": 99_999_999},
            "preserved_tail_tokens",
            "S + tail: S (post-compaction tokens) must be at most 100,000,000",
        ),
        ({"scenarios": "seed"}, "scenarios", ""),
        ({"scenarios": [{"threshold": 600000}]}, "scenarios", ""),
        (
            {"scenarios": [{"name": "tiny", "threshold": 60000, "penalty_steps": 28}]},
            "scenarios",
            "scenario 1 (tiny): threshold 60,000 must be above S (65,588)",
        ),
        (
            {"scenarios": [PRESET_8_1[0], {"threshold": 100000, "preserved_tail_tokens": 60000, "penalty_steps": 1}]},
            "scenarios",
            "scenario 2 (scenario 2): threshold 100,000 must be above S (125,588)",
        ),
    ],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_field(api_for, payload, field, says):
    response = post(api_for("viewer"), **payload)
    assert response.status_code == 400 and list(response.json()) == [field], response.json()
    assert says in str(response.json()[field])


def test_measured_disruption_length_comes_from_the_workspace(workspace, run_on_commit, api_for):
    """The planted corpus's correction rate stays above baseline to step 20 (60
    compactions): that is L unless the request gives one."""
    for name, lines in plant().sessions.items():
        ingest_bytes(
            workspace=workspace,
            name=f"{name}.jsonl",
            data=b"\n".join(lines) + b"\n",
            source="demo",
            refresh_analytics=False,
        )
    with run_on_commit():
        analytics_refresh_queue(workspace=workspace)
    body = post(api_for("viewer"), thresholds=[220000]).json()
    disruption = body["disruption"]
    assert (disruption["steps"], disruption["source"], disruption["compactions"]) == (
        20,
        "measured",
        60,
    )
    assert disruption["label"].startswith("measured, 20 steps (n = 60 compactions,")
    assert disruption["stale"] is False
    assert body["at_thresholds"][0]["degraded_share"] == pytest.approx(20 / 105.04, abs=1e-4)
    given = post(api_for("viewer"), thresholds=[220000], disruption_steps=30).json()
    assert given["disruption"]["source"] == "given"
    assert given["at_thresholds"][0]["degraded_share"] == pytest.approx(30 / 105.04, abs=1e-4)


def test_what_if_page_shows_the_cycle_table_and_the_section_8_1_scenarios(client_for, workspace):
    client = client_for("viewer")
    base = f"/w/{workspace.slug}/analytics/what-if/"
    page = client.get(base).content.decode()
    # the §8.1 preset is in the form and its comparison is shown
    assert 'name="a_threshold" value="600000"' in page and 'name="b_tail" value="60000"' in page
    preset = page.split('id="preset-8-1"', 1)[0].rsplit("href=", 1)[1]
    assert "post_compaction_tokens=65588" in preset and "b_penalty=14" in preset
    assert "costs <strong>24.7%</strong> less per productive step than 600k, bare digest" in page
    # the default thresholds, with the default L and where it comes from
    assert "L = <strong>30</strong> steps" in page and "default 30 (seed 001 §7.3)" in page
    assert '<tr data-threshold="220000">' in page and 'id="degraded-chart"' in page
    row_220k = page.split('<tr data-threshold="220000">', 1)[1].split("</tr>", 1)[0]
    assert "105" in row_220k and "143k" in row_220k and "28.6%" in row_220k
    row_577k = page.split('<tr data-threshold="577000">', 1)[1].split("</tr>", 1)[0]
    assert "348" in row_577k and "8.6%" in row_577k
    # a given L and one bad scenario value, named
    page = client.get(f"{base}?disruption_steps=55&b_penalty=-3").content.decode()
    assert "L = <strong>55</strong> steps" in page and "given, 55 steps" in page
    assert "b_penalty:" in page and 'id="scenario-table"' not in page
    # the tables' data as CSV
    data = client.get(f"{base}data/what-if-scenarios.csv").content.decode()
    rows = list(csv.reader(io.StringIO(data)))
    assert rows[0][:3] == ["name", "threshold", "preserved_tail_tokens"]
    assert rows[2][0] == "350k, 60k preserved tail" and float(rows[2][10]) == pytest.approx(0.2468)
    data = client.get(f"{base}data/what-if-cycle.csv?table_thresholds=220000").content.decode()
    rows = list(csv.reader(io.StringIO(data)))
    assert len(rows) == 2 and rows[1][0] == "220000" and float(rows[1][-1]) == 0.2856
    bad = client.get(f"{base}?table_thresholds=220k").content.decode()
    assert "table_thresholds" in bad and "is not a whole number of tokens" in bad


@pytest.mark.parametrize(
    ("section", "why"),
    [
        (
            {"elevated_until_step": None, "baseline": {"correction": {"ci": [0.1, 0.2]}}},
            "had not come back to its baseline before the baseline window",
        ),
        (
            {"elevated_until_step": None, "baseline": {"correction": {"ci": None}}},
            "too few operator messages in steps 60–150",
        ),
        (
            {
                "elevated_until_step": 0,
                "ratio_first5_to_baseline": {"value": 1.2, "ci": [0.4, 3.9]},
                "baseline": {"correction": {"ci": [0.1, 0.3]}},
            },
            "cannot rule out the seed's 2.37× elevation",
        ),
        (
            {
                "elevated_until_step": 0,
                "ratio_first5_to_baseline": {"value": None, "ci": None},
                "baseline": {"correction": {"ci": [0.1, 0.3]}},
            },
            "cannot rule out the seed's 2.37× elevation",
        ),
    ],
)
def test_an_unmeasured_elevation_falls_back_to_30_and_says_why(api_for, workspace, section, why):
    analytics_store(
        workspace=workspace,
        filters=AnalyticsFilters(),
        data_version=workspace.data_version,
        result={"post_compaction": {"compactions": 12, **section}},
        seconds=0.1,
    )
    disruption = post(api_for("viewer"), thresholds=[220000]).json()["disruption"]
    assert (disruption["steps"], disruption["source"]) == (30, "default")
    assert why in disruption["label"]


def test_a_precisely_measured_absence_of_elevation_is_kept_as_zero(api_for, workspace):
    analytics_store(
        workspace=workspace,
        filters=AnalyticsFilters(),
        data_version=workspace.data_version,
        result={
            "post_compaction": {
                "compactions": 900,
                "operator_messages": 40_000,
                "elevated_until_step": 0,
                "ratio_first5_to_baseline": {"value": 1.01, "ci": [0.93, 1.1]},
            }
        },
        seconds=0.1,
    )
    disruption = post(api_for("viewer"), thresholds=[220000]).json()["disruption"]
    assert (disruption["steps"], disruption["source"]) == (0, "measured")
