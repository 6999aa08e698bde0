"""The artifacts FilterSet's sort names (the page's column headers) order the API list."""

import pytest

pytestmark = pytest.mark.django_db


def test_artifacts_sort_by_the_page_names_on_the_api(api_for, store):
    small, big = store(b"a\n", tool_call_id="a"), store(b"bb\n" * 100, tool_call_id="b")
    api = api_for("viewer")
    ids = [a["id"] for a in api.get("/api/v1/artifacts/?sort=-bytes").json()["results"]]
    assert ids == [str(big.pk), str(small.pk)]
    ids = [a["id"] for a in api.get("/api/v1/artifacts/?sort=bytes").json()["results"]]
    assert ids == [str(small.pk), str(big.pk)]
