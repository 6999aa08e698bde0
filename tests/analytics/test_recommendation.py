"""The recommended auto-compact threshold (issue 19): the pure function on seed 001's
parameters, and GET /api/v1/recommendations/compaction/."""

from __future__ import annotations

import itertools

import pytest
from rest_framework.test import APIClient

from governance.models import Role
from governance.services import membership_set
from tests.analytics.recommendation_fixtures import (
    MODEL,
    SEED,
    SEED_CI,
    approve_limit,
    limit_64k,
    limit_128k,
    seed_parameters,
    store_parameters,
)
from traces.analysis.cycle import CycleInputError
from traces.analysis.recommendation import (
    BOOTSTRAP,
    INTERVAL_ENDS,
    Estimate,
    recommend,
)
from traces.models import Harness, Session

__all__ = ["limit_64k", "limit_128k"]
URL = "/api/v1/recommendations/compaction/"


def f(t, s, d, summ, p):
    """Seed 001 §5.1, written out again for the check."""
    n = (t - s) / d
    return (n * (s + t) / 2 + (t + summ) + p * s) / (n - p)


def grid_optimum(s, d, summ, p):
    """T* by brute force over whole tokens near the optimum (no closed form)."""
    best = min(range(150_000, 300_001, 10), key=lambda t: f(t, s, d, summ, p))
    return min(range(best - 10, best + 11), key=lambda t: f(t, s, d, summ, p))


def seed_estimates(with_ci=True):
    return {
        key: Estimate(SEED[name], SEED_CI[name] if with_ci else None, 873)
        for key, name in (("s", "S"), ("d", "D"), ("summ", "SUMM"), ("p", "P"))
    }


def test_seed_001_is_220k_clipped_to_115k_by_a_128k_ecl_with_a_10pct_reserve():
    plain = recommend(
        **seed_estimates(False), ecl_tokens=None, reserve_tokens=None, disruption_steps=30
    )
    assert grid_optimum(65_588, 1_470, 4_382, 28) == 219_970
    assert round(plain.optimum) == 219_970 and plain.threshold == 220_000
    assert plain.clipped is False and plain.ceiling is None
    assert plain.claude["command"] == "/autocompact 220000"
    clipped = recommend(
        **seed_estimates(False), ecl_tokens=128_000, reserve_tokens=12_800, disruption_steps=30
    )
    assert clipped.ceiling == 115_200 and clipped.clipped is True
    assert clipped.threshold == 115_200
    assert clipped.claude["command"] == "/autocompact 115200"
    assert clipped.claude["env"] == "CLAUDE_CODE_AUTO_COMPACT_WINDOW=115200"
    assert clipped.claude["setting"] == '"autoCompactWindow": 115200'
    assert clipped.codex["setting"] == "model_auto_compact_token_limit = 115200"
    # beside it: 1,000·f(T) and min(L, n)/n at 115,200 (n = 33.75 steps)
    n = (115_200 - 65_588) / 1_470
    assert clipped.recommended.tokens_per_1000_steps == pytest.approx(
        1000 * f(115_200, 65_588, 1_470, 4_382, 28)
    )
    assert clipped.recommended.degraded_share == pytest.approx(30 / n)
    assert clipped.recommended.ratio_to_optimum == pytest.approx(
        f(115_200, 65_588, 1_470, 4_382, 28) / f(219_970.24, 65_588, 1_470, 4_382, 28), rel=1e-6
    )


def test_a_ceiling_above_the_optimum_does_not_clip():
    answer = recommend(
        **seed_estimates(False), ecl_tokens=400_000, reserve_tokens=40_000, disruption_steps=30
    )
    assert (answer.threshold, answer.clipped, answer.ceiling) == (220_000, False, 360_000)
    assert answer.clipped_by is None and answer.bounds == {"ecl": 360_000}
    both = recommend(
        **seed_estimates(False), ecl_tokens=400_000, max_context_tokens=300_000,
        reserve_tokens=40_000, disruption_steps=30,
    )  # fmt: skip
    assert (both.threshold, both.clipped, both.clipped_by) == (220_000, False, None)
    assert both.bounds == {"ecl": 360_000, "max_context": 260_000} and both.ceiling == 260_000


def test_a_limit_whose_max_context_is_below_the_optimum_clips_it_there():
    """The ECL (400k − 20k) leaves the 220k optimum alone; the limit's own maximum context
    (200k − the same 20k reserve) does not: 180k, clipped by the maximum context."""
    answer = recommend(
        **seed_estimates(False), ecl_tokens=400_000, max_context_tokens=200_000,
        reserve_tokens=20_000, disruption_steps=30, in_use=250_000,
    )  # fmt: skip
    assert answer.bounds == {"ecl": 380_000, "max_context": 180_000}
    assert (answer.threshold, answer.ceiling, answer.clipped) == (180_000, 180_000, True)
    assert answer.clipped_by == "max_context"
    assert answer.claude["command"] == "/autocompact 180000"
    assert answer.codex["setting"] == "model_auto_compact_token_limit = 180000"
    assert answer.recommended.tokens_per_1000_steps == pytest.approx(
        1000 * f(180_000, 65_588, 1_470, 4_382, 28)
    )
    assert answer.notes == [
        "The setting in use (250,000) lets the context pass the approved limit's maximum "
        "context minus the reserve (180,000)."
    ]
    # The ECL binds when it is the lower bound, and names a tie.
    ecl = recommend(
        **seed_estimates(False), ecl_tokens=128_000, max_context_tokens=200_000,
        reserve_tokens=12_800, disruption_steps=30,
    )  # fmt: skip
    assert (ecl.threshold, ecl.clipped_by) == (115_200, "ecl")
    tie = recommend(
        **seed_estimates(False), ecl_tokens=128_000, max_context_tokens=128_000,
        reserve_tokens=12_800, disruption_steps=30,
    )  # fmt: skip
    assert (tie.threshold, tie.clipped_by) == (115_200, "ecl")
    # Without an established ECL, the maximum context alone bounds it.
    alone = recommend(
        **seed_estimates(False), ecl_tokens=None, max_context_tokens=150_000,
        reserve_tokens=15_000, disruption_steps=30,
    )  # fmt: skip
    assert (alone.threshold, alone.clipped_by, alone.bounds) == (
        135_000,
        "max_context",
        {"max_context": 135_000},
    )
    assert alone.as_dict()["clipped_by"] == "max_context"


def test_the_interval_is_the_optimum_at_the_interval_ends_or_the_bootstrap():
    ends = recommend(**seed_estimates(), ecl_tokens=None, reserve_tokens=None, disruption_steps=30)
    low = grid_optimum(61_000, 1_402, 4_100, 24)
    high = grid_optimum(70_100, 1_533, 4_690, 33)
    assert ends.optimum_interval_method == INTERVAL_ENDS
    assert ends.optimum_interval == pytest.approx((low, high), abs=1)
    # the range of 1,000·f(T*) over the 16 corners, checked corner by corner
    corners = [
        1000 * f(220_000, *c)
        for c in itertools.product(*(SEED_CI[k] for k in ("S", "D", "SUMM", "P")))
    ]
    assert ends.recommended.tokens_range == pytest.approx((min(corners), max(corners)))
    boot = recommend(
        **seed_estimates(),
        ecl_tokens=128_000,
        reserve_tokens=12_800,
        disruption_steps=30,
        bootstrap_interval=(190_000, 251_000),
    )
    assert boot.optimum_interval_method == BOOTSTRAP
    assert boot.optimum_interval == (190_000, 251_000)
    assert boot.threshold_interval == (115_200, 115_200)  # clipped like the threshold


def test_the_setting_in_use_is_priced_beside_it_and_flagged_above_the_ceiling():
    answer = recommend(
        **seed_estimates(False),
        ecl_tokens=128_000,
        reserve_tokens=12_800,
        disruption_steps=30,
        in_use=350_000,
    )
    used = answer.in_use
    assert used.threshold == 350_000
    assert used.tokens_per_1000_steps == pytest.approx(1000 * f(350_000, 65_588, 1_470, 4_382, 28))
    assert used.degraded_share == pytest.approx(30 / ((350_000 - 65_588) / 1_470))
    assert any("350,000" in note and "115,200" in note for note in answer.notes)


def test_a_ceiling_below_the_floor_or_claudes_range_is_said_plainly():
    # ECL 32k − 8k reserve: below S itself
    low = recommend(
        **seed_estimates(False), ecl_tokens=32_000, reserve_tokens=8_000, disruption_steps=30
    )
    assert low.threshold == 24_000 and low.clipped
    assert low.recommended.tokens_per_1000_steps is None
    assert low.claude["settable"] is False and "100,000 to 1,000,000" in low.claude["reason"]
    assert "Restart from the specification" in low.notes[0]
    # between S and the floor S + P·D = 106,748: no productive work
    mid = recommend(
        **seed_estimates(False), ecl_tokens=110_000, reserve_tokens=10_000, disruption_steps=30
    )
    assert mid.threshold == 100_000 and mid.recommended.tokens_per_1000_steps is None
    assert "floor" in mid.recommended.reason and "106,748" in mid.notes[0]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"ecl_tokens": 128_000, "reserve_tokens": 128_000}, "reserve_tokens"),
        (
            {"ecl_tokens": None, "max_context_tokens": 64_000, "reserve_tokens": 64_000},
            "reserve_tokens",
        ),
        (
            {"ecl_tokens": None, "max_context_tokens": 64_000, "reserve_tokens": None},
            "reserve_tokens",
        ),
        ({"ecl_tokens": None, "reserve_tokens": None, "in_use": 60_000}, "in_use"),
    ],
)
def test_unusable_inputs_name_the_field(kwargs, field):
    with pytest.raises(CycleInputError) as raised:
        recommend(**seed_estimates(False), disruption_steps=30, **kwargs)
    assert raised.value.field == field


# --- the API ------------------------------------------------------------------------------


def get(api, **params):
    return api.get(URL, params)


@pytest.mark.django_db
def test_api_gives_the_seed_recommendation_clipped_by_the_approved_limit(
    workspace, limit_128k, api_for
):
    store_parameters(workspace, optimum_ci=[190_000.0, 251_000.0])
    response = get(api_for("viewer"), model=MODEL, task_type="building")
    assert response.status_code == 200, response.json()
    body = response.json()
    rec = body["recommendation"]
    assert body["status"] == "ok" and body["threshold"] == 115_200
    assert rec["clipped"] is True and rec["ceiling"] == 115_200
    # A 128k maximum context minus the reserve is the same: the ECL names the tie.
    assert body["clipped_by"] == rec["clipped_by"] == "ecl"
    assert rec["bounds"] == {"ecl": 115_200, "max_context": 115_200}
    assert round(rec["optimum"]) == 219_970
    assert rec["optimum_interval"] == [190_000.0, 251_000.0]
    assert rec["optimum_interval_method"] == BOOTSTRAP
    assert body["limit"]["ecl_tokens"] == 128_000 and body["limit"]["reserve_tokens"] == 12_800
    assert body["limit"]["id"] == limit_128k.pk
    assert "weakest family" in body["limit"]["ecl_source"]
    assert rec["claude"]["command"] == "/autocompact 115200"
    assert rec["codex"]["setting"] == "model_auto_compact_token_limit = 115200"
    assert body["parameters"]["P"] == {
        "value": 28.0,
        "ci": [24, 33],
        "n": 873,
        "unit": "steps",
        "method": "test values",
    }
    assert body["disruption"]["source"] == "default" and rec["disruption_steps"] == 30
    assert body["in_use"] is None and rec["in_use"] is None and body["missing"] == []


@pytest.mark.django_db
def test_api_reads_the_setting_in_use_from_codex_telemetry_or_the_entered_one(
    workspace, other_workspace, limit_128k, api_for
):
    store_parameters(workspace)
    for i, (limit, target) in enumerate(
        [
            (300_000, workspace),
            (300_000, workspace),
            (250_000, workspace),
            (900_000, other_workspace),
        ]
    ):
        Session.objects.create(
            workspace=target,
            harness=Harness.CODEX,
            external_id=f"rollout-{i}",
            model_names=[MODEL],
            auto_compact_token_limit=limit,
        )
    body = get(api_for("viewer"), model=MODEL, task_type="building").json()
    assert body["in_use"]["tokens"] == 300_000 and body["in_use"]["source"] == "telemetry"
    assert body["in_use"]["sessions"] == 3 and body["in_use"]["agreeing"] == 2
    used = body["recommendation"]["in_use"]
    assert used["tokens_per_1000_steps"] == pytest.approx(
        1000 * f(300_000, 65_588, 1_470, 4_382, 28)
    )
    entered = get(api_for("viewer"), model=MODEL, task_type="building", in_use=200_000).json()
    assert entered["in_use"]["source"] == "entered"
    assert entered["recommendation"]["in_use"]["threshold"] == 200_000


@pytest.mark.django_db
def test_api_without_an_approved_limit_gives_the_optimum_unclipped_and_says_so(workspace, api_for):
    store_parameters(workspace)
    body = get(api_for("viewer"), model=MODEL, task_type="building").json()
    assert body["status"] == "ok" and body["threshold"] == 220_000
    assert body["recommendation"]["clipped"] is False and body["limit"] is None
    assert body["missing"] == [
        f"no approved operating limit for {MODEL}: the optimum is not clipped. Propose and "
        "approve one under Qualification → Operating limits."
    ]


@pytest.mark.django_db
def test_a_limit_whose_max_context_is_below_the_optimum_clips_it_in_the_api_and_the_page(
    workspace, limit_64k, api_for, client_for
):
    """The usual medium-consequence limit: ECL 128k, maximum context 64k (×0.75 down to a
    tested stratum), reserve 12.8k. The optimum (220k) stays at or below 64k − 12.8k."""
    store_parameters(workspace)
    body = get(api_for("viewer"), model=MODEL, task_type="building").json()
    rec = body["recommendation"]
    assert body["limit"]["max_context_tokens"] == 64_000 and body["limit"]["ecl_tokens"] == 128_000
    assert rec["bounds"] == {"ecl": 115_200, "max_context": 51_200}
    assert body["threshold"] == rec["ceiling"] == 51_200 and rec["clipped"] is True
    assert body["clipped_by"] == rec["clipped_by"] == "max_context"
    assert round(rec["optimum"]) == 219_970
    page = (
        client_for("viewer")
        .get(f"/w/{workspace.slug}/analytics/what-if/", {"model": MODEL, "task_type": "building"})
        .content.decode()
    )
    section = page.split('id="compaction-recommendation"', 1)[1].split("</section>", 1)[0]
    assert 'data-clipped-by="max_context"' in section
    assert "<strong>Clipped by the approved maximum context.</strong>" in section
    assert (
        "above the approved limit's maximum context 64k minus the approved reserve 12.8k: "
        "51,200 tokens." in section
    )
    assert "The qualified ECL 128k minus the reserve (115k) is higher." in section
    assert "/autocompact" not in section  # 51,200 is below Claude Code's 100,000


@pytest.mark.django_db
def test_api_says_what_is_missing_when_the_parameters_cannot_be_measured(workspace, api_for):
    section = seed_parameters()
    section["usable"] = False
    section["reasons"] = [
        "Only 3 compactions (fewer than 10): P, S and SUMM cannot be estimated.",
        "Only 12 steps start above 200,000 tokens: D cannot be estimated (need 50).",
    ]
    store_parameters(workspace, section=section)
    response = get(api_for("viewer"), model=MODEL, task_type="building")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "insufficient_data"
    assert body["missing"] == section["reasons"] and body["threshold"] is None


@pytest.mark.django_db
def test_api_queues_the_analytics_when_they_were_never_computed(workspace, api_for):
    response = get(api_for("viewer"), model=MODEL, task_type="research")
    body = response.json()
    assert response.status_code == 202 and body["status"] == "computing"
    assert "model = claude-sonnet-4-5; task type = research" in body["missing"][0]
    assert body["job_url"].rsplit("/jobs/", 1)[1].strip("/").isdigit()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params, field",
    [
        ({}, "model"),
        ({"model": "   "}, "model"),
        ({"model": MODEL, "task_type": "gardening"}, "task_type"),
        ({"model": MODEL, "in_use": "lots"}, "in_use"),
        ({"model": MODEL, "in_use": 0}, "in_use"),
    ],
)
def test_api_refuses_bad_parameters_naming_them(workspace, api_for, params, field):
    response = get(api_for("viewer"), **params)
    assert response.status_code == 400 and field in response.json(), response.json()


@pytest.mark.django_db
def test_api_refuses_a_setting_in_use_the_model_cannot_place(workspace, api_for):
    store_parameters(workspace)
    response = get(api_for("viewer"), model=MODEL, task_type="building", in_use=50_000)
    assert response.status_code == 400
    assert "above S" in response.json()["in_use"][0]


@pytest.mark.django_db
def test_api_is_scoped_to_the_workspace(
    workspace, other_workspace, members, run_on_commit, api_for
):
    """Another workspace's measured values and limit are invisible from this one."""
    for role in ("editor", "admin"):
        membership_set(workspace=other_workspace, user=members[role], role=Role.from_name(role))
    store_parameters(other_workspace)
    approve_limit(other_workspace, members, run_on_commit)
    response = get(api_for("viewer"), model=MODEL, task_type="building")
    assert response.status_code == 202 and response.json()["status"] == "computing"
    store_parameters(workspace)
    body = get(api_for("viewer"), model=MODEL, task_type="building").json()
    assert body["limit"] is None and body["threshold"] == 220_000  # the other's limit unseen
    assert APIClient().get(URL, {"model": MODEL}).status_code in (401, 403)


@pytest.mark.django_db
def test_the_endpoint_is_documented(api_for):
    schema = api_for("viewer").get("/api/schema/?format=json").json()
    get_op = schema["paths"]["/api/v1/recommendations/compaction/"]["get"]
    assert "clipped" in get_op["description"]
    assert "model_auto_compact_token_limit" in get_op["description"]
    names = {p["name"] for p in get_op["parameters"]}
    assert {"model", "task_type", "workload", "in_use"} <= names


# --- the pages --------------------------------------------------------------------------


@pytest.mark.django_db
def test_what_if_and_limit_pages_show_the_setting_to_paste(workspace, limit_128k, client_for):
    store_parameters(workspace)
    client = client_for("viewer")
    page = client.get(
        f"/w/{workspace.slug}/analytics/what-if/",
        {"model": MODEL, "task_type": "building", "in_use": 350_000},
    ).content.decode()
    section = page.split('id="compaction-recommendation"', 1)[1].split("</section>", 1)[0]
    assert (
        "Recommended auto-compact threshold for <strong>claude-sonnet-4-5</strong>, building: <strong>115k</strong> (115,200 tokens)"
        in section
    )
    assert "/autocompact 115200" in section
    assert "export CLAUDE_CODE_AUTO_COMPACT_WINDOW=115200" in section
    assert "model_auto_compact_token_limit = 115200" in section
    assert "<strong>Clipped by the qualified ECL.</strong> The cycle optimum is 220k" in section
    assert 'data-clipped-by="ecl"' in section
    assert (
        "above the qualified ECL 128k minus the approved reserve 12.8k: 115,200 tokens." in section
    )
    assert 'data-row="in-use"' in section and "350k" in section
    limit_page = client.get(
        f"/w/{workspace.slug}/qualification/limits/{limit_128k.pk}/", {"task_type": "building"}
    ).content.decode()
    assert "/autocompact 115200" in limit_page
    assert 'type="hidden" name="model" value="claude-sonnet-4-5"' in limit_page
    # nothing measured for research yet: the section says what is missing
    research = client.get(
        f"/w/{workspace.slug}/qualification/limits/{limit_128k.pk}/", {"task_type": "research"}
    ).content.decode()
    assert "Not enough data yet for claude-sonnet-4-5, research." in research
    assert "have not been computed" in research


# --- end to end on ingested traces ------------------------------------------------------


@pytest.mark.django_db
def test_api_on_ingested_traces_matches_the_cycle_optimum_of_the_measured_values(
    corpus, workspace, members, run_on_commit, api_for
):
    """A generated corpus, ingested; the analytics for the model computed by a real job
    queued from the first read; the answer is the brute-force optimum of the measured S, D,
    SUMM and P, clipped by the approved limit (ECL 128k − 12.8k). One model throughout: the
    model filter takes a whole name (it once took "claude" for both of the corpus's)."""
    corpus(models=(MODEL,))
    approve_limit(workspace, members, run_on_commit, model=MODEL)
    api = api_for("viewer")
    with run_on_commit():
        first = get(api, model=MODEL)  # the whole name: the analytics filter takes no part
    assert first.status_code == 202 and first.json()["status"] == "computing"
    body = get(api, model=MODEL).json()
    assert body["status"] == "ok", body
    values = {k: body["parameters"][k]["value"] for k in ("S", "D", "SUMM", "P")}
    s, d, summ, p = values["S"], values["D"], values["SUMM"], values["P"]
    t_star = min(range(int(s + p * d) + 1, 1_000_001, 10), key=lambda t: f(t, s, d, summ, p))
    assert body["recommendation"]["optimum"] == pytest.approx(t_star, abs=10)
    expected = min(round(body["recommendation"]["optimum"] / 1000) * 1000, 115_200)
    assert body["threshold"] == expected
    assert body["recommendation"]["clipped"] is (expected == 115_200)
    assert body["recommendation"]["optimum_interval_method"] == BOOTSTRAP
    assert body["compactions"] >= 10


@pytest.mark.django_db
def test_api_on_ingested_traces_names_what_is_missing(corpus, run_on_commit, api_for):
    corpus()
    api = api_for("viewer")
    with run_on_commit():
        assert get(api, model="gpt-5-codex").status_code == 202
    body = get(api, model="gpt-5-codex").json()
    assert body["status"] == "insufficient_data" and body["threshold"] is None
    assert (
        "Only 0 compactions (fewer than 10): P, S and SUMM cannot be estimated." in body["missing"]
    )


@pytest.mark.django_db
def test_a_reported_setting_the_model_cannot_place_is_shown_not_priced(workspace, api_for):
    store_parameters(workspace)
    Session.objects.create(
        workspace=workspace,
        harness=Harness.CODEX,
        external_id="rollout-low",
        model_names=[MODEL],
        auto_compact_token_limit=50_000,
    )
    body = get(api_for("viewer"), model=MODEL, task_type="building").json()
    assert body["status"] == "ok" and body["threshold"] == 220_000
    assert body["in_use"]["tokens"] == 50_000 and "must be above S" in body["in_use"]["label"]
    assert body["recommendation"]["in_use"] is None
