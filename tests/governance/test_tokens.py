"""API tokens: hashed at rest, shown once, revocable, and they record when they were last used."""

import hashlib
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from governance.models import ApiToken, AuditEvent
from governance.services import api_token_create, api_token_revoke

pytestmark = pytest.mark.django_db


def test_only_the_hash_is_stored(workspace, members):
    issued = api_token_create(workspace=workspace, user=members["editor"], name="ci")
    stored = ApiToken.objects.get(pk=issued.token.pk)
    assert issued.plaintext.startswith("cg_") and len(issued.plaintext) > 40
    assert stored.token_hash == hashlib.sha256(issued.plaintext.encode()).hexdigest()
    assert issued.plaintext not in {
        str(v) for v in ApiToken.objects.values_list(flat=False).get(pk=stored.pk)
    }
    assert issued.plaintext.startswith(stored.prefix)
    assert "plaintext" not in repr(issued)


def test_token_authenticates_and_records_last_use(api_for):
    api = api_for("editor")
    token = api.token.token
    assert token.last_used_at is None
    response = api.get("/api/v1/workspace/")
    assert response.status_code == 200
    assert response.json() == {
        "workspace": response.json()["workspace"],
        "user": "editor-a",
        "role": "editor",
    }
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None and timezone.now() - first_use < timedelta(seconds=10)
    # Within a minute the timestamp is not rewritten on every request.
    api.get("/api/v1/workspace/")
    token.refresh_from_db()
    assert token.last_used_at == first_use
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first_use - timedelta(minutes=5))
    api.get("/api/v1/workspace/")
    token.refresh_from_db()
    assert token.last_used_at > first_use - timedelta(minutes=5)


def test_revoked_token_is_refused_with_a_clear_message(api_for, members):
    api = api_for("editor")
    api_token_revoke(token=api.token.token, actor=members["editor"])
    response = api.get("/api/v1/jobs/")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]
    assert AuditEvent.objects.filter(
        action="api_token.revoke", object_id=str(api.token.token.pk)
    ).exists()


def test_unknown_and_malformed_tokens(db):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer cg_nope_nope")
    assert client.get("/api/v1/jobs/").json() == {"detail": "Invalid token."}
    client.credentials(HTTP_AUTHORIZATION="Bearer a b")
    assert "Malformed" in client.get("/api/v1/jobs/").json()["detail"]


def test_removed_member_loses_token(api_for, workspace, members):
    from governance.services import membership_remove

    api = api_for("viewer")
    membership_remove(
        membership=members["viewer"].memberships.get(workspace=workspace), actor=members["admin"]
    )
    assert api.get("/api/v1/jobs/").status_code == 401


def test_tokens_page_shows_a_new_token_once(client_for, workspace):
    client = client_for("viewer")
    created = client.post(f"/w/{workspace.slug}/settings/tokens/", {"name": "laptop"})
    assert created.status_code == 200
    assert created["Cache-Control"] == "no-store"
    plaintext = created.context["issued"].plaintext
    assert plaintext in created.content.decode()
    again = client.get(f"/w/{workspace.slug}/settings/tokens/").content.decode()
    assert plaintext not in again
    assert plaintext[:11] in again  # the prefix identifies it


def test_api_token_create_and_revoke_through_api(api_for):
    api = api_for("viewer")
    created = api.post("/api/v1/tokens/", {"name": "second"}, format="json")
    assert created.status_code == 201
    secret = created.json()["token"]
    listed = api.get("/api/v1/tokens/").json()["results"]
    assert all("token" not in item for item in listed)
    revoked = api.post(f"/api/v1/tokens/{created.json()['id']}/revoke/")
    assert revoked.json()["revoked_at"] is not None
    from rest_framework.test import APIClient

    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert other.get("/api/v1/jobs/").status_code == 401


def test_tokens_never_reach_the_logs(api_for):
    from governance.logging import RedactSecretsFilter, redact

    secret = api_for("editor").token.plaintext
    record = logging.LogRecord(
        "x", logging.WARNING, __file__, 1, "auth header Authorization: Bearer %s", (secret,), None
    )
    RedactSecretsFilter().filter(record)
    assert secret not in record.getMessage()
    assert "[redacted]" in record.getMessage()
    assert secret not in redact(f"token={secret}")
    assert "hunter2" not in redact("postgres://user:hunter2@db/x")
    assert "hunter2" not in redact('{"password": "hunter2"}')
    handler_filters = [type(f).__name__ for h in logging.getLogger().handlers for f in h.filters]
    assert "RedactSecretsFilter" in handler_filters
