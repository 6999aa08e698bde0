"""The model filter takes one of the workspace's models by its whole name, on the sessions
page, the sessions API, the analytics pages and the analytics API alike: "claude-sonnet-4"
never also selects "claude-sonnet-4-5"."""

import pytest

from traces.analytics.selectors import AnalyticsFilters, load
from traces.filters import SessionFilter
from traces.models import Call, Session
from traces.selectors import workspace_models
from traces.services import ingest_bytes
from traces.synthetic import CorpusParams, generate_corpus

pytestmark = pytest.mark.django_db

SHORT, LONG = "claude-sonnet-4", "claude-sonnet-4-5"  # one is a prefix of the other


@pytest.fixture
def prefix_models(workspace, other_workspace, run_on_commit):
    """Five sessions alternating SHORT and LONG; the other workspace uses a third model.
    Returns {model: (sessions, calls)} counted from the generator, not the database."""
    params = CorpusParams(
        sessions=5, seed=11, steps_per_session=(12, 20), subagents_per_session=(0, 1),
        models=(SHORT, LONG),
    )  # fmt: skip
    planted = {SHORT: [0, 0], LONG: [0, 0]}
    with run_on_commit():
        for index, generated in enumerate(generate_corpus(params)):
            planted[params.models[index % 2]][0] += 1
            planted[params.models[index % 2]][1] += generated.calls
            ingest_bytes(
                workspace=workspace, name=f"{generated.session_id}.jsonl",
                data=b"\n".join(generated.lines) + b"\n", source="demo", refresh_analytics=False,
            )  # fmt: skip
        other = CorpusParams(sessions=1, seed=12, models=("claude-opus-4-1",))
        for generated in generate_corpus(other):
            ingest_bytes(
                workspace=other_workspace, name=f"{generated.session_id}.jsonl",
                data=b"\n".join(generated.lines) + b"\n", source="demo", refresh_analytics=False,
            )  # fmt: skip
    return {model: tuple(counts) for model, counts in planted.items()}


def test_the_workspace_models_are_its_own(workspace, other_workspace, prefix_models):
    assert workspace_models(workspace=workspace) == [SHORT, LONG]
    assert workspace_models(workspace=other_workspace) == ["claude-opus-4-1"]


def test_the_analytics_select_the_calls_of_exactly_that_model(workspace, prefix_models):
    assert prefix_models[SHORT][0] == 3 and prefix_models[LONG][0] == 2
    for model, (_, calls) in prefix_models.items():
        data = load(workspace, AnalyticsFilters(model=model))
        assert len(data.calls) == calls > 0, model  # the generator's count
        assert len(data.calls) == Call.objects.filter(workspace=workspace, model=model).count()
    everything = load(workspace, AnalyticsFilters())
    assert len(everything.calls) == sum(calls for _, calls in prefix_models.values())


def test_the_sessions_api_and_page_list_the_sessions_of_exactly_that_model(
    workspace, prefix_models, api_for, client_for
):
    api = api_for("viewer")
    for model, (sessions, _) in prefix_models.items():
        body = api.get("/api/v1/sessions/", {"model": model}).json()
        assert body["count"] == sessions, model
        assert all(item["models"] == [model] for item in body["results"])
        page = client_for("viewer").get(f"/w/{workspace.slug}/traces/", {"model": model})
        assert page.status_code == 200
        listed = page.content.decode().count('href="/w/team-a/traces/sessions/')
        assert listed == sessions, model
    # The same name in another case is taken as that model (links from the substring days).
    assert api.get("/api/v1/sessions/", {"model": LONG.upper()}).json()["count"] == 2


@pytest.mark.parametrize("value", ["claude-sonnet", "sonnet-4", "SONNET"])
def test_a_part_of_a_name_is_a_clear_400_naming_the_models(
    workspace, prefix_models, api_for, value
):
    api = api_for("viewer")
    for url in ("/api/v1/sessions/", "/api/v1/analytics/cost-curve/"):
        response = api.get(url, {"model": value})
        assert response.status_code == 400, url
        (message,) = response.json()["model"]
        assert f"No model is named exactly '{value}'" in message
        assert f"Models containing it: {SHORT}, {LONG}." in message


def test_another_workspaces_model_is_not_a_choice(workspace, prefix_models, api_for, client_for):
    response = api_for("viewer").get("/api/v1/analytics/steps/", {"model": "claude-opus-4-1"})
    assert response.status_code == 400
    assert response.json()["model"] == [
        f"No call in this workspace used a model named 'claude-opus-4-1'. Choose one of: "
        f"{SHORT}, {LONG}."
    ]
    assert Session.objects.filter(model_names__icontains="opus").exists()  # it exists elsewhere


def test_the_pages_show_the_error_and_no_figures(workspace, prefix_models, client_for):
    client = client_for("viewer")
    analytics = client.get(f"/w/{workspace.slug}/analytics/", {"model": "claude-sonnet"})
    assert analytics.status_code == 400
    text = analytics.content.decode()
    assert 'data-testid="invalid-filters"' in text and "Models containing it" in text
    assert "No analytics for" not in text and "Compute now" not in text
    sessions = client.get(f"/w/{workspace.slug}/traces/", {"model": "claude-sonnet"})
    assert sessions.status_code == 400
    text = sessions.content.decode()
    assert 'data-testid="invalid-filters"' in text and "Models containing it" in text
    assert 'href="/w/team-a/traces/sessions/' not in text
    csv = client.get(f"/w/{workspace.slug}/analytics/data/cost-curve.csv", {"model": "x"})
    assert csv.status_code == 400 and csv.content.decode().startswith("Invalid filters: model:")
    # The select offers exactly the workspace's models.
    ok = client.get(f"/w/{workspace.slug}/analytics/", {"model": SHORT})
    assert ok.status_code == 200
    assert f'<option value="{SHORT}" selected>{SHORT}</option>' in ok.content.decode()
    assert f'<option value="{LONG}">{LONG}</option>' in ok.content.decode()


def test_the_filterset_without_a_workspace_offers_no_model():
    form = SessionFilter({"model": SHORT}).form
    assert not form.is_valid() and "no traces are ingested yet" in form.errors["model"][0]
