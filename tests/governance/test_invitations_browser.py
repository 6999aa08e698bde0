"""An admin invites by username; the invitee signs in, sees the invitation, accepts it and
lands in the workspace. Nobody joins without accepting."""

import pytest

from governance.models import Invitation, Membership, Role
from governance.services import invitation_create, user_get_or_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 1920)


def test_admin_invites_and_the_invitee_accepts(page, login, members, workspace, screenshot):
    nora = user_get_or_create(username="nora", password="nora-secret-pass")
    login("admin-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/settings/members/")
    invite = page.get_by_role("region", name="Invite someone")
    invite.get_by_label("Username or e-mail").fill("nora")
    invite.get_by_label("Role").select_option("editor")
    with page.expect_navigation():  # back to the same URL, with the answer
        invite.get_by_role("button", name="Invite").click()
    assert (
        page.locator(".message.success")
        .inner_text()
        .startswith(
            "Invited nora as editor. They see the invitation when they sign in; it expires on"
        )
    )
    invitations = page.get_by_role("table").nth(1)
    assert invitations.locator("tbody tr td").nth(0).inner_text() == "nora"
    assert invitations.locator("tbody tr td").nth(1).inner_text() == "editor"
    assert not Membership.objects.filter(workspace=workspace, user=nora).exists()
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(f"members-{width}")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/accounts/login/")

    login("nora", "nora-secret-pass")
    page.goto(f"{page.base_url}/")
    assert page.get_by_role("heading", level=1).inner_text() == "You are invited"
    expires = Invitation.objects.get(invitee="nora").expires_at
    assert page.locator(".invitation p").inner_text() == (
        f"Team A: admin-a invites you as editor. Expires {expires:%Y-%m-%d}."
    )
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(f"no-workspace-invited-{width}")
    page.get_by_role("button", name="Accept and join Team A").click()
    page.wait_for_url(f"**/w/{workspace.slug}/")
    assert page.get_by_role("heading", name="Team A", level=1).is_visible()
    assert page.locator(".message.success").inner_text() == "You joined Team A as editor."
    assert page.locator(".role-badge").inner_text() == "editor"
    assert Membership.objects.get(workspace=workspace, user=nora).role == Role.EDITOR


def test_a_member_sees_a_banner_and_declines(
    page, login, members, workspace, other_workspace, outsider, screenshot
):
    invitation_create(
        workspace=other_workspace, invitee="editor-a", role=Role.VIEWER, actor=outsider
    )
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/")
    banner = page.get_by_role("status").filter(has_text="open invitation")
    assert banner.inner_text() == (
        "You have 1 open invitation to another workspace. See your invitations"
    )
    banner.get_by_role("link", name="See your invitations").click()
    page.wait_for_url("**/invitations/")
    assert page.get_by_role("heading", level=1).inner_text() == "Your invitations"
    assert (
        page.locator(".invitation p")
        .inner_text()
        .startswith("Team B: outsider invites you as viewer.")
    )
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(f"invitations-{width}")
    with page.expect_navigation():
        page.get_by_role("button", name="Decline").click()
    assert page.locator(".message").inner_text() == "You declined the invitation to Team B."
    assert page.get_by_text("You have no open invitations.").is_visible()
    assert not Membership.objects.filter(workspace=other_workspace, user=members["editor"]).exists()
