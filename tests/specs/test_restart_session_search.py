"""The restart-package builder names its trace session by id prefix, title or project,
resolved on the server within the workspace, with a clear error when it is unknown or
ambiguous; htmx suggests sessions as the user types."""

from datetime import UTC, datetime

import pytest

from governance.errors import InputError
from specs import selectors
from specs.models import RestartPackage
from traces.models import Session

pytestmark = pytest.mark.django_db

W = "/w/team-a/specs"


@pytest.fixture
def sessions(workspace, other_workspace):
    def make(ws, external_id, title="", project="", day=1):
        return Session.objects.create(
            workspace=ws, harness="claude-code", external_id=external_id, title=title,
            project=project, started_at=datetime(2026, 11, day, 9, 30, tzinfo=UTC),
        )  # fmt: skip

    return {
        "refunds": make(workspace, "3f2a9c10-aaaa", title="Refunds loop", day=3),
        "billing": make(workspace, "3f7b0000-bbbb", project="/home/dev/billing-api", day=2),
        "web": make(workspace, "9e11d2c4-cccc", project="/home/dev/web-app", day=1),
        "foreign": make(other_workspace, "3f2a9c10-zzzz", title="Refunds loop elsewhere"),
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3f2a9c10-aaaa", "refunds"),  # the whole id
        ("3f2a", "refunds"),  # a prefix only one session of this workspace has
        ("  3F2A9 ", "refunds"),  # case and spaces do not matter
        ("refunds", "refunds"),  # a word of the title
        ("billing-api", "billing"),  # a part of the project
    ],
)
def test_a_session_is_found_by_id_prefix_title_or_project(workspace, sessions, text, expected):
    assert selectors.trace_session_resolve(workspace=workspace, text=text) == sessions[expected]


def test_an_ambiguous_text_names_the_candidates(workspace, sessions):
    with pytest.raises(InputError) as caught:
        selectors.trace_session_resolve(workspace=workspace, text="3f")
    assert caught.value.message == (
        "“3f” matches 2 trace sessions: 3f2a9c10 (Refunds loop, 2026-11-03 09:30); "
        "3f7b0000 (/home/dev/billing-api, 2026-11-02 09:30). Type more of the id, or choose "
        "one from the suggestions."
    )


def test_another_workspaces_session_is_unknown(workspace, sessions):
    with pytest.raises(InputError, match="No trace session in this workspace"):
        selectors.trace_session_resolve(workspace=workspace, text="3f2a9c10-zzzz")
    assert sessions["foreign"] not in selectors.trace_sessions_matching(
        workspace=workspace, text="refunds"
    )


def builder_post(version, **extra):
    return {"spec_version": version.pk, "commit": "abcdef1", "next_action": "Fix it.", **extra}


def test_the_builder_links_the_session_named_by_a_prefix(
    client_for, authoritative, sessions, workspace
):
    _spec, v1 = authoritative()
    client = client_for("editor")
    ambiguous = client.post(f"{W}/restart-packages/new/", builder_post(v1, trace_session="3f"))
    assert ambiguous.status_code == 400
    page = ambiguous.content.decode()
    assert "matches 2 trace sessions: 3f2a9c10 (Refunds loop" in page
    assert 'name="trace_session" value="3f"' in page
    assert not RestartPackage.objects.exists()
    unknown = client.post(f"{W}/restart-packages/new/", builder_post(v1, trace_session="nope"))
    assert unknown.status_code == 400
    assert "No trace session in this workspace has an id starting with" in (
        unknown.content.decode()
    )
    good = client.post(f"{W}/restart-packages/new/", builder_post(v1, trace_session="3f2a"))
    assert good.status_code == 302
    assert RestartPackage.objects.get().trace_session == sessions["refunds"]


def test_suggestions_follow_what_is_typed(client_for, sessions):
    client = client_for("editor")
    response = client.get(
        f"{W}/restart-packages/new/?suggest=session&trace_session=home/dev", HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert html.strip().startswith('<datalist id="trace-session-options">')
    assert '<option value="3f7b0000-bbbb">/home/dev/billing-api · 2026-11-02 09:30' in html
    assert '<option value="9e11d2c4-cccc">' in html
    assert "3f2a9c10" not in html
    # Without JavaScript the page lists the most recent sessions to choose from.
    page = client.get(f"{W}/restart-packages/new/").content.decode()
    assert page.index("3f2a9c10-aaaa") < page.index("3f7b0000-bbbb") < page.index("9e11d2c4")
    assert "3f2a9c10-zzzz" not in page
