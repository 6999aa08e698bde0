"""WorkspaceFormView and WorkspaceObjectView: the shape most screens are configured from."""

import pytest

from governance.models import AuditEvent
from governance.services import job_create

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.governance.generic_views_urls")]


def note_url(workspace):
    return f"/w/{workspace.slug}/test-notes/new/"


def test_the_form_page_shows_the_form_with_its_initial_values(client_for, workspace):
    response = client_for("editor").get(note_url(workspace))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="title"' in html and "start here" in html


def test_a_valid_form_makes_one_service_call_and_redirects_with_a_message(
    client_for, workspace, members
):
    response = client_for("editor").post(note_url(workspace), {"title": "ok"}, follow=True)
    event = AuditEvent.objects.get(action="note.record")
    assert event.actor == members["editor"] and event.data == {"t": "ok"}
    assert response.redirect_chain == [(f"/w/{workspace.slug}/settings/audit/", 302)]
    assert f"Recorded event #{event.pk}." in response.content.decode()


def test_an_invalid_form_is_shown_again_with_400_and_no_service_call(client_for, workspace):
    response = client_for("editor").post(note_url(workspace), {"title": "x" * 21})
    assert response.status_code == 400
    assert "Ensure this value has at most 20 characters" in response.content.decode()
    assert not AuditEvent.objects.filter(action="note.record").exists()


def test_a_service_input_error_is_bound_to_the_form_fields_with_400(client_for, workspace):
    response = client_for("editor").post(note_url(workspace), {"title": "taken", "body": "b"})
    assert response.status_code == 400
    form = response.context["form"]
    assert form.errors["title"] == ["That title is taken."]
    # A field the form does not have is shown above the form, not lost.
    assert form.non_field_errors() == ["Not here."]
    html = response.content.decode()
    assert "That title is taken." in html and "Not here." in html
    assert 'value="b"' in html or ">b<" in html  # what was typed stays


def test_a_service_input_error_without_fields_is_shown_above_the_form(client_for, workspace):
    response = client_for("editor").post(note_url(workspace), {"title": "plain"})
    assert response.status_code == 400
    assert response.context["form"].non_field_errors() == [
        "Nothing is wrong with one field; the whole note is refused."
    ]


def test_a_service_conflict_is_shown_with_its_message_and_409(client_for, workspace):
    response = client_for("editor").post(note_url(workspace), {"title": "busy"})
    assert response.status_code == 409
    assert "Someone else is writing this note." in response.content.decode()
    assert not AuditEvent.objects.filter(action="note.record").exists()


def test_the_form_page_checks_the_write_role_on_the_server(client_for, workspace):
    assert client_for("viewer").post(note_url(workspace), {"title": "ok"}).status_code == 403
    assert not AuditEvent.objects.filter(action="note.record").exists()


def test_the_object_page_shows_its_object_and_404s_another_workspaces(
    client_for, workspace, other_workspace
):
    mine = job_create(workspace=workspace, kind="trial_upload", label="Upload of run 7")
    theirs = job_create(workspace=other_workspace, kind="trial_upload", label="Secret upload")
    client = client_for("viewer")
    page = client.get(f"/w/{workspace.slug}/jobs/{mine.pk}/")
    assert page.status_code == 200 and page.context["job"] == mine
    assert "Upload of run 7" in page.content.decode()
    foreign = client.get(f"/w/{workspace.slug}/jobs/{theirs.pk}/")
    assert foreign.status_code == 404
    assert "Secret upload" not in foreign.content.decode()
