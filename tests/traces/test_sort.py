"""One sort vocabulary: a FilterSet's `sort` names order the page and the API alike."""

import pytest

from tests.traces.factories import claude_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_sessions(workspace, ingest, tmp_path):
    for n in range(3):
        path = tmp_path / f"s{n}.jsonl"
        path.write_text("\n".join(claude_session(2 + n, session=f"sess-{n}")) + "\n")
        ingest(path)


def _api_ids(api, query):
    return [s["external_id"] for s in api.get(f"/api/v1/sessions/?{query}").json()["results"]]


def test_a_sort_name_orders_the_sessions_page_and_api_alike(
    client_for, api_for, workspace, three_sessions
):
    page = client_for("viewer").get(f"/w/{workspace.slug}/traces/?sort=-calls").content.decode()
    assert page.index("sess-2") < page.index("sess-1") < page.index("sess-0")
    api = api_for("viewer")
    assert _api_ids(api, "sort=-calls") == ["sess-2", "sess-1", "sess-0"]
    assert _api_ids(api, "sort=calls") == ["sess-0", "sess-1", "sess-2"]
    assert _api_ids(api, "sort=calls&q=sess") == ["sess-0", "sess-1", "sess-2"]


def test_the_api_keeps_its_older_ordering_names(api_for, three_sessions):
    api = api_for("viewer")
    assert _api_ids(api, "ordering=-call_count") == ["sess-2", "sess-1", "sess-0"]
    assert _api_ids(api, "ordering=call_count") == ["sess-0", "sess-1", "sess-2"]


def test_an_unknown_sort_is_400_on_the_api_and_ignored_on_the_page(
    client_for, api_for, workspace, three_sessions
):
    response = api_for("viewer").get("/api/v1/sessions/?sort=bogus")
    assert response.status_code == 400 and "sort" in response.json()
    page = client_for("viewer").get(f"/w/{workspace.slug}/traces/?sort=bogus&q=sess-1")
    html = page.content.decode()
    assert page.status_code == 200 and "sess-1" in html and "sess-2" not in html
    assert 'name="sort"' in html and html.count('name="sort"') == 1  # not a second form field
