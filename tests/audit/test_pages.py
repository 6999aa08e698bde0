"""The audit pages through Django's client: roles, other workspaces, escaping, form errors."""

import html

import pytest

from tests.annotations.conftest import HOSTILE
from traces.audit import services
from traces.audit.analysis.sampling import strata_counts
from traces.audit.models import Audit, AuditStep, Judgment

pytestmark = pytest.mark.django_db


def test_list_shows_the_empty_state_then_the_audit(client_for, workspace, audit):
    page = client_for("viewer").get(f"/w/{workspace.slug}/audits/")
    assert page.status_code == 200
    assert audit.name in page.content.decode()


def test_empty_list_says_what_to_do(client_for, workspace):
    body = client_for("reviewer").get(f"/w/{workspace.slug}/audits/").content.decode()
    assert "No audits yet" in body and "New audit" in body


def test_create_form_lists_strata_and_rejects_bad_sizes(client_for, workspace, corpus):
    client = client_for("reviewer")
    page = html.unescape(client.get(f"/w/{workspace.slug}/audits/new/").content.decode())
    counts = strata_counts(services.run_infos(workspace=workspace))
    for key in counts:
        assert f'name="size:{key}"' in page
    key = next(iter(counts))
    bad = client.post(f"/w/{workspace.slug}/audits/new/", {"name": "x", f"size:{key}": "many"})
    assert bad.status_code == 400
    assert f"{key}: 'many' is not a whole number" in html.unescape(bad.content.decode())
    assert client_for("editor").get(f"/w/{workspace.slug}/audits/new/").status_code == 200
    assert client_for("editor").post(f"/w/{workspace.slug}/audits/new/", {}).status_code == 403
    good = client.post(f"/w/{workspace.slug}/audits/new/", {"name": "y", f"size:{key}": "1"})
    assert good.status_code == 302
    assert Audit.objects.get(name="y").strata_sizes == {key: 1}


def test_judge_page_escapes_transcript_text(
    client_for, workspace, members, hostile_session, run_on_commit
):
    sizes = dict.fromkeys(strata_counts(services.run_infos(workspace=workspace)), 5)
    with run_on_commit():
        audit = services.audit_create(
            workspace=workspace, actor=members["admin"], name="h", strata_sizes=sizes, seed=1
        )
    step = AuditStep.objects.filter(packet__audit=audit, had_through_item__gte=1).first()
    body = (
        client_for("editor")
        .get(f"/w/{workspace.slug}/audits/{audit.pk}/steps/{step.pk}/")
        .content.decode()
    )
    assert HOSTILE not in body
    assert "&lt;script&gt;alert(" in body


def test_other_workspace_is_404_and_viewer_cannot_judge(client_for, workspace, audit, outsider):
    from django.test import Client

    stranger = Client()
    stranger.force_login(outsider)
    assert stranger.get(f"/w/{workspace.slug}/audits/{audit.pk}/").status_code == 404
    step = AuditStep.objects.filter(packet__audit=audit).first()
    viewer = client_for("viewer")
    url = f"/w/{workspace.slug}/audits/{audit.pk}/steps/{step.pk}/"
    assert (
        viewer.post(url, {"counterfactual": "unaffected", "confidence": "low"}).status_code == 403
    )
    assert not Judgment.objects.exists()


def test_a_judgment_posted_on_the_page_shows_in_results(client_for, workspace, audit):
    client = client_for("editor")
    next_page = client.get(f"/w/{workspace.slug}/audits/{audit.pk}/judge/")
    assert next_page.status_code == 302
    step = (
        AuditStep.objects.filter(packet__audit=audit).order_by("packet__position", "number").first()
    )
    assert next_page["Location"].endswith(f"/steps/{step.pk}/")
    ids = [1] if step.had_through_item else []
    response = client.post(
        next_page["Location"],
        {"active_item_ids": ids, "counterfactual": "impossible", "confidence": "high"},
    )
    assert response.status_code == 302
    body = client.get(f"/w/{workspace.slug}/audits/{audit.pk}/results/").content.decode()
    assert "1</strong> step judged" in body
    assert "Impossible" in body
    # The next step offered is another one.
    assert not client.get(f"/w/{workspace.slug}/audits/{audit.pk}/judge/")["Location"].endswith(
        f"/steps/{step.pk}/"
    )


def test_dashboard_card_empty_then_counting(workspace, members, audit):
    from traces.audit.dashboard import card

    stats = dict(card(workspace).stats)
    assert stats == {"Audits": "1", "Open": "1", "Steps judged": "0", "Judgments": "0"}
    step = AuditStep.objects.filter(packet__audit=audit).first()
    services.judgment_record(
        step=step, actor=members["editor"], judge_kind="human", active_item_ids=[],
        verbatim_needed=False, counterfactual="unaffected", confidence="low",
    )  # fmt: skip
    services.judgment_record(
        step=step, actor=members["editor"], judge_kind="llm", judge_label="judge v1",
        active_item_ids=[], verbatim_needed=False, counterfactual="unaffected", confidence="low",
    )  # fmt: skip
    stats = dict(card(workspace).stats)
    assert (stats["Steps judged"], stats["Judgments"]) == ("1", "2")


def test_dashboard_card_empty_state(workspace):
    from traces.audit.dashboard import card

    empty = card(workspace)
    assert empty.empty and "No audits yet" in empty.empty_message


def test_close_and_reopen_check_the_role_and_are_audit_logged(client_for, workspace, audit):
    from governance.models import AuditEvent

    url = f"/w/{workspace.slug}/audits/{audit.pk}/status/"
    detail = f"/w/{workspace.slug}/audits/{audit.pk}/"
    assert audit.status == "open"
    for role in ("viewer", "editor"):  # judges may not close it
        assert client_for(role).post(url, {"status": "closed"}).status_code == 403
        assert "Close the audit" not in client_for(role).get(detail).content.decode()
    audit.refresh_from_db()
    assert audit.status == "open"
    reviewer = client_for("reviewer")
    assert reviewer.get(url).status_code == 405
    assert "Close the audit" in reviewer.get(detail).content.decode()
    assert reviewer.post(url, {"status": "deleted"}).status_code == 400

    closed = reviewer.post(url, {"status": "closed"}, follow=True)
    assert closed.status_code == 200
    body = closed.content.decode()
    assert "closed: it takes no more judgments" in body and "Reopen the audit" in body
    assert "Judge the next step" not in body
    audit.refresh_from_db()
    assert audit.status == "closed"
    event = AuditEvent.objects.filter(action="audit.closed").get()
    assert event.actor.username == "reviewer-a" and event.object_id == str(audit.pk)

    reopened = reviewer.post(url, {"status": "open"}, follow=True).content.decode()
    assert "reopened" in reopened and "Close the audit" in reopened
    audit.refresh_from_db()
    assert audit.status == "open"
    assert AuditEvent.objects.filter(action="audit.open").count() == 1


def test_close_is_scoped_to_the_workspace(client_for, workspace, other_workspace, audit):
    from governance.models import Membership, Role

    client = client_for("reviewer")
    user = client.get(f"/w/{workspace.slug}/audits/").wsgi_request.user
    Membership.objects.create(workspace=other_workspace, user=user, role=Role.ADMIN)
    url = f"/w/{other_workspace.slug}/audits/{audit.pk}/status/"
    assert client.post(url, {"status": "closed"}).status_code == 404
    audit.refresh_from_db()
    assert audit.status == "open"
