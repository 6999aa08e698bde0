"""The artifacts list marks deleted and expired artifacts instead of linking them as live."""

from datetime import timedelta

import pytest
from django.utils import timezone

from artifacts import services
from artifacts.models import Artifact

pytestmark = pytest.mark.django_db


def _row(html: str, command: str) -> str:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return next(row for row in body.split("<tr")[1:] if command in row)


def test_gone_artifacts_are_marked_and_link_only_to_their_tombstone(
    client_for, store, workspace, members
):
    live = store(b"ok\n", command="make live")
    deleted = store(b"secret\n", command="make deleted")
    services.artifact_delete(artifact=deleted, actor=members["editor"], reason="personal data")
    lapsed = store(b"old\n", command="make lapsed")
    Artifact.objects.filter(pk=lapsed.pk).update(expires_at=timezone.now() - timedelta(days=1))
    html = client_for("viewer").get(f"/w/{workspace.slug}/artifacts/").content.decode()
    base = f"/w/{workspace.slug}/artifacts/"

    row = _row(html, "make live")
    assert f'<a class="art-command" href="{base}{live.pk}/"><code>make live</code></a>' in row
    assert "why it is gone" not in row

    row = _row(html, "make deleted")
    assert 'class="art-gone"' in row
    assert '<span class="badge status-deleted">deleted</span>' in row
    assert '<code class="art-command">make deleted</code>' in row
    assert "Content deleted" in row
    assert (
        f'<a href="{base}{deleted.pk}/" title="What it was, and why it is deleted">why it is gone</a>'
        in row
    )

    row = _row(html, "make lapsed")
    assert '<span class="badge status-expired">expired</span>' in row
    assert '<code class="art-command">make lapsed</code>' in row
    assert "Content expired" in row
