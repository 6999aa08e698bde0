"""htmx requests and auth: an expired session reloads the whole window on the login page,
and a CSRF failure answers a message that app.js shows."""

import pytest
from django.test import Client

from governance.models import ApiToken

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_htmx_request_without_a_session_gets_hx_redirect_to_login(workspace):
    response = Client().get(
        f"/w/{workspace.slug}/jobs/?page=2",
        HTTP_HX_CURRENT_URL=f"http://testserver/w/{workspace.slug}/jobs/?status=failed",
        **HTMX,
    )
    assert response.status_code == 200
    # Back to the page the browser shows, not the fragment URL htmx asked for.
    assert (
        response["HX-Redirect"]
        == f"/accounts/login/?next=/w/{workspace.slug}/jobs/%3Fstatus%3Dfailed"
    )
    assert "Location" not in response
    assert response.content == b""


def test_htmx_redirect_ignores_a_current_url_on_another_host(workspace):
    response = Client().get(
        f"/w/{workspace.slug}/jobs/", HTTP_HX_CURRENT_URL="https://evil.example/phish", **HTMX
    )
    assert response["HX-Redirect"] == f"/accounts/login/?next=/w/{workspace.slug}/jobs/"


def test_plain_request_without_a_session_still_gets_a_302(workspace):
    response = Client().get(f"/w/{workspace.slug}/jobs/")
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next=/w/{workspace.slug}/jobs/"
    assert "HX-Redirect" not in response


@pytest.fixture
def csrf_client(members):
    client = Client(enforce_csrf_checks=True)
    client.force_login(members["viewer"])
    return client


def test_htmx_post_without_csrf_token_is_403_with_a_message(csrf_client, workspace):
    response = csrf_client.post(f"/w/{workspace.slug}/settings/tokens/", {"name": "laptop"}, **HTMX)
    assert response.status_code == 403
    page = response.content.decode()
    # app.js shows the text of the element marked data-error-message.
    assert (
        '<p data-error-message role="alert">Your form expired or was sent from another site, '
        "so nothing was saved. Reload the page and try again.</p>"
    ) in page
    assert response["Cache-Control"] == "no-store"
    assert not ApiToken.objects.filter(name="laptop").exists()


def test_htmx_post_with_the_csrf_header_is_accepted(csrf_client, workspace, members):
    page = csrf_client.get(f"/w/{workspace.slug}/settings/tokens/")
    token = csrf_client.cookies["csrftoken"].value
    # base.html puts the header on <body hx-headers=…> for every htmx request.
    assert 'hx-headers=\'{"X-CSRFToken": "' in page.content.decode()
    response = csrf_client.post(
        f"/w/{workspace.slug}/settings/tokens/",
        {"name": "laptop"},
        HTTP_X_CSRFTOKEN=token,
        **HTMX,
    )
    assert response.status_code == 200
    created = ApiToken.objects.get(name="laptop")
    assert created.user == members["viewer"] and created.workspace == workspace


def test_every_page_has_the_box_app_js_fills_on_a_failed_htmx_request(client_for, workspace):
    # The behaviour itself is checked in Chromium (test_browser.py).
    page = client_for("viewer").get(f"/w/{workspace.slug}/").content.decode()
    assert '<div id="request-error" class="request-error" role="alert"' in page
    assert page.count('id="request-error"') == 1
