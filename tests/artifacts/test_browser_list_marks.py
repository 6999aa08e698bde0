"""In Chromium, the artifacts list marks deleted and expired artifacts; only their
tombstone is linked."""

from datetime import timedelta

import pytest
from django.utils import timezone

from artifacts import services
from artifacts.models import Artifact
from tests.screenshots import shoot_widths

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_gone_artifacts_are_marked_and_lead_to_their_tombstone(
    page, login, members, workspace, store
):
    store(b"ok\n", run_id="run-live", command="make live")
    deleted = store(b"secret\n", run_id="run-del", command="make deleted")
    services.artifact_delete(artifact=deleted, actor=members["editor"], reason="personal data")
    lapsed = store(b"old\n", run_id="run-old", command="make lapsed")
    Artifact.objects.filter(pk=lapsed.pk).update(expires_at=timezone.now() - timedelta(days=1))
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/artifacts/")
    rows = page.locator("table.art-table tbody tr")

    live = rows.filter(has_text="make live")
    assert live.get_by_role("link", name="make live").is_visible()
    assert live.locator(".badge").inner_text() == "available"

    gone = rows.filter(has_text="make deleted")
    assert gone.locator(".badge").inner_text() == "deleted"
    assert gone.get_by_role("link", name="make deleted").count() == 0
    assert "Content deleted" in gone.locator("td").first.inner_text()

    expired = rows.filter(has_text="make lapsed")
    assert expired.locator(".badge").inner_text() == "expired"
    assert expired.get_by_role("link", name="make lapsed").count() == 0
    assert "Content expired" in expired.locator("td").first.inner_text()
    shoot_widths(page, "artifacts-list")

    gone.get_by_role("link", name="why it is gone").click()
    page.wait_for_load_state("networkidle")
    assert page.get_by_text("Deleted.", exact=True).is_visible()
    assert page.get_by_text("personal data").first.is_visible()
