"""Defects found in review: the last admin, a fractional job filter and formula-like CSV cells."""

import pytest

from governance.errors import Conflict
from governance.models import Membership, Role
from governance.services import membership_remove, membership_set
from traces.analytics.post_compaction_views import _spreadsheet_safe

pytestmark = pytest.mark.django_db


def test_the_only_admin_cannot_step_down_or_leave(workspace, members, client_for, api_for):
    admin = Membership.objects.get(workspace=workspace, user=members["admin"])
    with pytest.raises(Conflict, match="only admin"):
        membership_set(workspace=workspace, user=members["admin"], role=Role.VIEWER)
    with pytest.raises(Conflict, match="only admin"):
        membership_remove(membership=admin, actor=members["admin"])
    response = api_for("admin").patch(
        f"/api/v1/members/{admin.pk}/", {"role": "viewer"}, format="json"
    )
    assert response.status_code == 409 and "only admin" in response.json()["detail"]
    admin.refresh_from_db()
    assert admin.role == Role.ADMIN
    membership_set(workspace=workspace, user=members["editor"], role=Role.ADMIN)
    membership_set(workspace=workspace, user=members["admin"], role=Role.VIEWER)  # now allowed
    admin.refresh_from_db()
    assert admin.role == Role.VIEWER


@pytest.mark.parametrize("value", ["1.5", "1e30", "abc"])
def test_a_job_filter_that_is_not_a_whole_number_is_a_clear_400_not_a_500(
    workspace, client_for, value
):
    # It used to be a 500, then was ignored; since filters that cannot be applied list
    # nothing (an exact model filter must not fall back to every session), it is a 400 that
    # names the field.
    page = client_for("viewer").get(f"/w/{workspace.slug}/traces/?job={value}")
    body = page.content.decode()
    assert page.status_code == 400
    assert 'data-testid="invalid-filters"' in body and "From upload (job #):" in body
    assert "Sessions from upload job" not in body


@pytest.mark.parametrize(
    ("cell", "written"),
    [("=HYPERLINK(1)", "'=HYPERLINK(1)"), ("+1", "'+1"), ("-no", "'-no"), ("@a", "'@a"),
     ("no, stop", "no, stop"), (12, 12)],
)  # fmt: skip
def test_operator_text_that_reads_as_a_formula_is_quoted_in_the_csv(cell, written):
    assert _spreadsheet_safe(cell) == written
