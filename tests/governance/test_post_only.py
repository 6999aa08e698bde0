"""A page URL that only takes POST answers 405 to a GET, never a 500."""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.views.generic import TemplateView


def _view_classes(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _view_classes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            view_class = getattr(pattern.callback, "view_class", None)
            if view_class is not None:
                yield prefix + str(pattern.pattern), view_class


def test_no_post_only_view_inherits_a_template_get():
    """A view that defines `post` and renders nothing on GET must not inherit TemplateView's
    `get`, which renders a missing or context-less template (a 500)."""
    offenders = sorted(
        route
        for route, view_class in _view_classes(get_resolver().url_patterns)
        if hasattr(view_class, "post")
        and "get" in view_class.http_method_names
        and getattr(view_class, "get", None) is TemplateView.get
        and view_class.get_context_data is TemplateView.get_context_data
    )
    assert offenders == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "annotations/queues/1/next/",
        "annotations/queues/1/finish/",
        "annotations/queues/1/status/",
        "qualification/sweeps/1/upload/",
        "qualification/sweeps/1/analyse/",
        "qualification/sweeps/1/lock/",
        "qualification/limits/1/approve/",
        "qualification/limits/1/withdraw/",
        "qualification/limits/1/check/",
        "context-files/{file}/drift-checks/",
        "context-files/{file}/verifications/",
        "context-files/{file}/settings/",
        "context-files/evaluations/{evaluation}/trials/",
        "context-files/evaluations/{evaluation}/decisions/",
    ],
)
def test_a_get_on_a_post_only_page_answers_405(client, workspace, members, path):
    client.force_login(members["admin"])
    url = f"/w/{workspace.slug}/" + path.format(file=1, evaluation=1)
    response = client.get(url)
    assert response.status_code == 405
    assert "POST" in response["Allow"] and "GET" not in response["Allow"]
