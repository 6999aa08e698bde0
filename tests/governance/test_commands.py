"""The admin commands of the public interface."""

import io

import pytest
from django.core.management import CommandError, call_command

from governance.models import ApiToken, Membership, Role, Workspace
from governance.services import token_hash

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_workspace_and_members():
    assert "Created workspace ops" in run("create_workspace", "ops", "--name", "Ops team")
    assert Workspace.objects.get(slug="ops").name == "Ops team"
    with pytest.raises(CommandError, match="already exists"):
        run("create_workspace", "ops")
    with pytest.raises(CommandError, match="No user 'ann'"):
        run("add_member", "ops", "ann", "editor")
    run("add_member", "ops", "ann", "editor", "--create-user", "--password", "pw-123-xyz")
    membership = Membership.objects.get(workspace__slug="ops", user__username="ann")
    assert membership.role == Role.EDITOR and membership.user.check_password("pw-123-xyz")
    run("add_member", "ops", "ann", "reviewer")
    membership.refresh_from_db()
    assert membership.role == Role.REVIEWER
    with pytest.raises(CommandError, match="unknown role 'boss'"):
        run("add_member", "ops", "ann", "boss")
    with pytest.raises(CommandError, match="No workspace 'nope'"):
        run("add_member", "nope", "ann", "viewer")


def test_create_api_token_prints_only_the_token():
    run("create_workspace", "ops")
    run("add_member", "ops", "bob", "viewer", "--create-user")
    output = run("create_api_token", "--user", "bob", "--workspace", "ops")
    token = output.strip()
    assert output == token + "\n" and token.startswith("cg_")
    assert ApiToken.objects.get(token_hash=token_hash(token)).user.username == "bob"
    run("create_workspace", "elsewhere")
    with pytest.raises(CommandError, match="not a member"):
        run("create_api_token", "--user", "bob", "--workspace", "elsewhere")
