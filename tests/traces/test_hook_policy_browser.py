"""An admin sets the hook policy in Chromium; a viewer reads it."""

import pytest

from tests.specs.conftest import authoritative, make_spec  # noqa: F401 (fixtures)
from traces.models import HookPolicy

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def no_horizontal_overflow(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_admin_sets_the_policy_viewer_reads_it(
    page,
    login,
    members,
    workspace,
    authoritative,  # noqa: F811
    screenshot,
):
    spec, version = authoritative()
    login("admin-a")
    url = f"{page.base_url}/w/{workspace.slug}/traces/hooks/settings/"
    page.goto(url)
    key = f"{spec.slug} v{version.number} (sha256:{version.fingerprint[:12]})"
    assert (
        page.get_by_test_id("restart-spec")
        .inner_text()
        .endswith(
            f"key {key}. The suggestion links to a restart package prefilled with this version "
            "and the session."
        )
    )
    assert page.get_by_label("suggest a restart from the authoritative specification").is_checked()
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 1000})
        assert no_horizontal_overflow(page), width
        screenshot(f"hook-policy-admin-{width}")
    page.get_by_label("block the automatic compaction and suggest a restart").check()
    page.get_by_label(
        "Give the agent the operating limit and the specification's key at session start"
    ).uncheck()
    page.get_by_label("Authoritative specification to restart from").select_option(spec.slug)
    page.get_by_role("button", name="Save policy").click()
    page.wait_for_load_state("load")
    assert page.get_by_text("Hook policy saved.").is_visible()
    assert page.get_by_label("block the automatic compaction and suggest a restart").is_checked()
    policy = HookPolicy.objects.get(workspace=workspace)
    assert (policy.pre_compact_action, policy.session_start_context, policy.spec_id) == (
        "block",
        False,
        spec.pk,
    )
    screenshot("hook-policy-saved")

    page.context.clear_cookies()
    login("viewer-a")
    page.goto(url)
    assert page.get_by_text("Only admins change this.").is_visible()
    assert page.get_by_test_id("pre-compact-action").inner_text() == (
        "block the automatic compaction and suggest a restart"
    )
    assert page.get_by_test_id("session-start-context").inner_text() == "not given"
    assert page.get_by_role("button", name="Save policy").count() == 0
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 1000})
        assert no_horizontal_overflow(page), width
        screenshot(f"hook-policy-viewer-{width}")
