"""The domain errors map once: the API answers their status with as_body(), pages flash them."""

import pytest

from governance import errors
from governance.models import Membership

pytestmark = pytest.mark.django_db

SPEC = {"title": "Payments API", "slug": "payments", "consequence": "high"}


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.InputError("Bad slug."), 400),
        (errors.Forbidden("Reviewers only.", code="role"), 403),
        (errors.Conflict("Taken.", payload={"current_version": {"id": 7, "number": 2}}), 409),
        (errors.Gone("Deleted on 2026-01-01."), 410),
    ],
)
def test_a_domain_error_from_a_service_answers_its_status_and_body(
    api_for, monkeypatch, error, status
):
    def refuse(**kwargs):
        raise error

    monkeypatch.setattr("specs.services.spec_create", refuse)
    response = api_for("editor").post("/api/v1/specs/", SPEC, format="json")
    assert response.status_code == status
    assert response.json() == error.as_body()
    assert response.json()["detail"] == error.message


def test_a_conflict_body_keeps_its_payload_next_to_detail_and_code(api_for, monkeypatch):
    def refuse(**kwargs):
        raise errors.Conflict("Taken.", payload={"current_version": {"id": 7, "number": 2}})

    monkeypatch.setattr("specs.services.spec_create", refuse)
    body = api_for("editor").post("/api/v1/specs/", SPEC, format="json").json()
    assert body == {
        "detail": "Taken.",
        "code": "conflict",
        "current_version": {"id": 7, "number": 2},
    }


def test_a_domain_error_after_a_page_write_reshows_the_page_with_a_flash(
    client_for, workspace, monkeypatch
):
    def refuse(**kwargs):
        raise errors.Forbidden("Only the owner may change roles today.")

    monkeypatch.setattr("governance.services.membership_set", refuse)
    viewer = Membership.objects.get(workspace=workspace, user__username="viewer-a")
    response = client_for("admin").post(
        f"/w/{workspace.slug}/settings/members/", {"member": viewer.pk, "role": "editor"}
    )
    assert response.status_code == 403
    html = response.content.decode()
    assert "Only the owner may change roles today." in html
    assert "viewer-a" in html  # the members page itself, shown again


def test_a_domain_error_on_a_page_read_shows_the_message_with_its_status(
    client_for, workspace, monkeypatch
):
    def gone(**kwargs):
        raise errors.Gone("This job was purged.")

    monkeypatch.setattr("governance.selectors.job_get", gone)
    response = client_for("viewer").get(f"/w/{workspace.slug}/jobs/1/")
    assert response.status_code == 410
    assert "This job was purged." in response.content.decode()


def test_an_input_error_about_fields_answers_in_drf_validation_shape(api_for, monkeypatch):
    def refuse(**kwargs):
        raise errors.InputError.for_fields({"slug": "Taken.", "owner": ["Not a member."]})

    monkeypatch.setattr("specs.services.spec_create", refuse)
    response = api_for("editor").post("/api/v1/specs/", SPEC, format="json")
    assert response.status_code == 400
    assert response.json() == {"slug": ["Taken."], "owner": ["Not a member."]}
