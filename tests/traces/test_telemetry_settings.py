"""The telemetry identity setting: a page and an API; everyone reads it, admins change it."""

import pytest

from governance.models import AuditEvent
from traces.models import TelemetryPolicy

pytestmark = pytest.mark.django_db


def settings_url(workspace):
    return f"/w/{workspace.slug}/traces/telemetry/settings/"


def test_the_page_shows_the_default_and_only_admins_change_it(client_for, workspace):
    viewer = client_for("viewer").get(settings_url(workspace))
    assert viewer.status_code == 200
    assert "replace with a keyed hash" in viewer.content.decode()
    denied = client_for("editor").post(settings_url(workspace), {"identity": "keep"})
    assert denied.status_code == 403
    admin = client_for("admin")
    saved = admin.post(settings_url(workspace), {"identity": "drop"}, follow=True)
    assert saved.status_code == 200 and "Telemetry settings saved." in saved.content.decode()
    assert TelemetryPolicy.objects.get(workspace=workspace).identity == "drop"
    audit = AuditEvent.objects.get(action="telemetry_policy.update")
    assert audit.data == {"changed": {"identity": {"from": "hash", "to": "drop"}}}
    invalid = admin.post(settings_url(workspace), {"identity": "publish"})
    assert invalid.status_code == 400 and "publish is not one of the available choices" in (
        invalid.content.decode()
    )


def test_the_api_reads_and_changes_it(api_for, workspace, other_workspace):
    url = "/api/v1/telemetry/settings/"
    assert api_for("viewer").get(url).json()["identity"] == "hash"
    assert api_for("editor").patch(url, {"identity": "keep"}, format="json").status_code == 403
    changed = api_for("admin").patch(url, {"identity": "keep"}, format="json")
    assert changed.status_code == 200 and changed.json()["identity"] == "keep"
    assert api_for("admin").patch(url, {"identity": "x"}, format="json").status_code == 400
    assert TelemetryPolicy.objects.get(workspace=workspace).identity == "keep"
    assert not TelemetryPolicy.objects.filter(workspace=other_workspace).exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_admin_changes_the_setting_in_chromium(page, login, members, workspace, screenshot):
    login("admin-a")
    page.goto(f"{page.base_url}{settings_url(workspace)}")
    assert page.get_by_label("replace with a keyed hash").is_checked()
    page.get_by_label("drop").check()
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_load_state("networkidle")
    assert page.get_by_text("Telemetry settings saved.").is_visible()
    assert page.get_by_label("drop").is_checked()
    screenshot("telemetry-settings")
    assert TelemetryPolicy.objects.get(workspace=workspace).identity == "drop"
