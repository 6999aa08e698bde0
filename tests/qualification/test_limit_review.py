"""Approving a limit: the page and the API show what it removes or loosens, require a
confirmation on the server, and keep the reviewer's comment in the audit log and on the limit."""

import json
import re

import pytest

from governance.models import AuditEvent
from numfmt import tokens as format_tokens
from qualification import services
from qualification.models import OperatingLimit

pytestmark = pytest.mark.django_db

BASE = "/w/team-a/qualification"
SEED_STAGES = [
    "ticket_parsing", "plan_generation", "file_selection", "code_generation", "reviewer_summary",
]  # fmt: skip


def approvals(limit) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(action="operating_limit.approve", object_id=str(limit.pk))
    )


def test_the_page_shows_justification_thumbnail_and_flags_before_the_button(
    client_for, dropping_successor
):
    body = client_for("reviewer").get(f"{BASE}/limits/{dropping_successor.pk}/").content.decode()
    flags = body[body.index('class="flag-list"') : body.index("</ul>", body.index("flag-list"))]
    for key in SEED_STAGES:
        assert f"removed: stage <code>{key}</code> budget" in flags, key
    assert f"removed: stage <code>ticket_parsing</code> budget {format_tokens(4000)}" in flags
    assert f"removed: source <code>history</code> limit {format_tokens(6000)}" in flags
    assert f"removed: source <code>memory</code> limit {format_tokens(1000)}" in flags
    assert (
        f"loosened: source <code>system</code> limit {format_tokens(3000)} → {format_tokens(3500)}"
        in flags
    )
    assert "8 values are removed or loosened" in body
    figure = json.loads(
        re.search(
            r'<script id="limit-decline-data" type="application/json">(.*?)</script>', body
        ).group(1)
    )
    assert {t["name"] for t in figure["data"] if t.get("showlegend", True)} >= {
        "retrieval",
        "code_change",
    }
    assert any("this limit" in a["text"] for a in figure["layout"]["annotations"])
    # Reading order: the justification, the thumbnail and the flags come before the button.
    button = body.index(">Approve limit</button>")
    for marker in ('id="why-h"', 'id="limit-decline"', 'class="flag-list"', 'name="confirm"'):
        assert body.index(marker) < button, marker
    assert "I have read the justification and the flagged changes" in body


def test_approving_without_the_confirmation_is_400_and_changes_nothing(
    client_for, dropping_successor
):
    response = client_for("reviewer").post(
        f"{BASE}/limits/{dropping_successor.pk}/approve/", {"comment": "looks fine"}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert re.search(
        r'<p class="error" role="alert"[^>]*>Tick “I have read the justification', body
    )
    assert "looks fine</textarea>" in body  # what the reviewer typed is kept
    dropping_successor.refresh_from_db()
    assert dropping_successor.status == "proposed" and approvals(dropping_successor) == []


def test_a_confirmed_approval_keeps_the_comment_and_the_flags(
    client_for, dropping_successor, members
):
    reviewer = client_for("reviewer")
    response = reviewer.post(
        f"{BASE}/limits/{dropping_successor.pk}/approve/",
        {"confirm": "on", "comment": "Stages move to the harness <config>."},
    )
    assert response.status_code == 302
    dropping_successor.refresh_from_db()
    assert dropping_successor.status == "approved"
    (event,) = approvals(dropping_successor)
    assert event.actor == members["reviewer"]
    assert event.data["comment"] == "Stages move to the harness <config>."
    assert event.data["compared_with"] == dropping_successor.supersedes_id
    assert len(event.data["flagged"]) == 8
    assert f"removed: source `memory` limit {format_tokens(1000)}" in event.data["flagged"]
    page = reviewer.get(f"{BASE}/limits/{dropping_successor.pk}/").content.decode()
    shown = re.search(r'<p data-testid="approval">(.*?)</p>', page, re.S).group(1)
    assert "Approved by reviewer-a</strong> on " in shown
    assert "Stages move to the harness &lt;config&gt;." in shown
    assert ">Approve limit</button>" not in page
    log = client_for("admin").get("/w/team-a/settings/audit/?action=operating_limit.approve")
    assert "Stages move to the harness &lt;config&gt;." in log.content.decode()


def test_an_overlong_comment_is_refused_with_the_field_named(client_for, dropping_successor):
    response = client_for("reviewer").post(
        f"{BASE}/limits/{dropping_successor.pk}/approve/",
        {"confirm": "on", "comment": "x" * (services.COMMENT_MAX_CHARS + 1)},
    )
    assert response.status_code == 400
    assert "at most 2000 characters" in response.content.decode().replace(",", "")
    dropping_successor.refresh_from_db()
    assert dropping_successor.status == "proposed"


def test_separation_of_duties_comes_before_the_confirmation(client_for, dropping_successor):
    services.operating_limit_update(
        limit=dropping_successor, actor=dropping_successor.created_by, rationale="again"
    )
    # The proposer has only the editor role: refused by role, even when confirming.
    editor = client_for("editor").post(
        f"{BASE}/limits/{dropping_successor.pk}/approve/", {"confirm": "on"}
    )
    assert editor.status_code == 403
    from governance.models import Membership, Role

    membership = Membership.objects.get(user=dropping_successor.created_by)
    membership.role = Role.REVIEWER
    membership.save()
    # Now a reviewer, the proposer still may not approve their own limit, confirmed or not.
    for data in ({}, {"confirm": "on"}):
        response = client_for("editor").post(
            f"{BASE}/limits/{dropping_successor.pk}/approve/", data
        )
        assert response.status_code == 403
        assert "another reviewer must approve it" in response.content.decode()
    dropping_successor.refresh_from_db()
    assert dropping_successor.status == "proposed"


def test_a_proposal_that_supersedes_nothing_is_compared_with_the_active_limit(
    client_for, loaded_qualification, members
):
    first = services.operating_limit_propose(
        qualification=loaded_qualification,
        actor=members["editor"],
        name="First",
        values={"source_limits": {"memory": 1000}},
    )
    rival = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["editor"], name="Rival"
    )
    assert rival.supersedes is None
    page = client_for("reviewer").get(f"{BASE}/limits/{rival.pk}/").content.decode()
    assert "nothing to compare with" in page
    client_for("reviewer").post(f"{BASE}/limits/{first.pk}/approve/", {"confirm": "on"})
    page = client_for("reviewer").get(f"{BASE}/limits/{rival.pk}/").content.decode()
    assert f"#{first.pk} First</a>, the active limit for model-x" in page
    assert "(this proposal does not supersede it)" in page
    assert f"removed: source <code>memory</code> limit {format_tokens(1000)}" in page


def test_the_api_takes_confirm_and_comment(api_for, dropping_successor):
    url = f"/api/v1/operating-limits/{dropping_successor.pk}/approve/"
    reviewer = api_for("reviewer")
    detail = reviewer.get(f"/api/v1/operating-limits/{dropping_successor.pk}/").json()
    flagged = [c["text"] for c in detail["review"]["changes"] if c["flagged"]]
    assert detail["review"]["compared_with"] == dropping_successor.supersedes_id
    assert len(flagged) == 8 and detail["approval_comment"] is None
    for body in ({}, {"confirm": False}, {"comment": "ok"}):
        refused = reviewer.post(url, body, format="json")
        assert refused.status_code == 400, body
        assert refused.json()["detail"].startswith("confirm: Tick “I have read")
    too_long = reviewer.post(
        url, {"confirm": True, "comment": "x" * (services.COMMENT_MAX_CHARS + 1)}, format="json"
    )
    assert too_long.status_code == 400 and "comment" in too_long.json()
    assert OperatingLimit.objects.get(pk=dropping_successor.pk).status == "proposed"
    approved = reviewer.post(
        url, {"confirm": True, "comment": "History moves to memory."}, format="json"
    )
    assert approved.status_code == 200, approved.json()
    assert approved.json()["status"] == "approved"
    assert approved.json()["approval_comment"] == "History moves to memory."
    (event,) = approvals(dropping_successor)
    assert event.data["comment"] == "History moves to memory." and event.data["flagged"] == flagged


def test_the_api_keeps_separation_of_duties_before_the_confirmation(
    api_for, dropping_successor, members
):
    url = f"/api/v1/operating-limits/{dropping_successor.pk}/approve/"
    assert api_for("editor").post(url, {"confirm": True}, format="json").status_code == 403
    services.operating_limit_update(
        limit=dropping_successor, actor=members["reviewer"], rationale="edited"
    )
    denied = api_for("reviewer").post(url, {}, format="json")
    assert denied.status_code == 403 and "another reviewer" in denied.json()["detail"]


def test_the_schema_documents_confirm_and_comment(api_for):
    schema = api_for("viewer").get("/api/schema/?format=json").json()
    approve = schema["paths"]["/api/v1/operating-limits/{id}/approve/"]["post"]
    assert "`confirm: true`" in approve["description"] and "`comment`" in approve["description"]
    ref = approve["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    fields = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]
    assert set(fields) == {"confirm", "comment", "reviewed"}
    assert "must be true" in fields["confirm"]["description"]
    assert "audit log" in fields["comment"]["description"]
    limit = schema["components"]["schemas"]["OperatingLimit"]["properties"]
    assert {"review", "approval_comment"} <= set(limit)


def test_the_qualification_page_leads_a_reviewer_to_the_limit_awaiting_them(
    client_for, dropping_successor, members
):
    url = f"{BASE}/sweeps/{dropping_successor.qualification_id}/"
    page = client_for("reviewer").get(url).content.decode()
    banner = f"Limit #{dropping_successor.pk} awaits your review"
    link = f'<a class="button primary" href="{BASE}/limits/{dropping_successor.pk}/">{banner}</a>'
    assert link in page
    assert page.index(link) < page.index('id="analysis-region"')
    # The review leads: proposing another limit is no longer the primary action.
    propose = f"{BASE}/sweeps/{dropping_successor.qualification_id}/propose-limit/"
    assert f'<a class="button" href="{propose}">Propose operating limit</a>' in page
    for role in ("editor", "viewer"):  # the proposer, and a member who cannot review
        assert banner not in client_for(role).get(url).content.decode(), role


def test_a_stricter_successor_has_no_flags_and_lists_its_other_changes(
    client_for, dropping_successor, members
):
    stricter = services.operating_limit_propose(
        qualification=dropping_successor.qualification,
        actor=members["editor"],
        name="Agents v3",
        values={
            "max_context_tokens": 8000,
            "reserve_tokens": 2000,
            "max_initial_assembly_tokens": 6000,
            "source_limits": {"system": 3000, "history": 6000, "memory": 1000},
        },
        use_stage_template=True,
    )
    body = client_for("reviewer").get(f"{BASE}/limits/{stricter.pk}/").content.decode()
    assert f"Nothing is removed or loosened compared with #{stricter.supersedes_id}." in body
    assert 'class="flag-list"' not in body
    others = body[
        body.index("<h3>Other changes</h3>") : body.index(
            "</table>", body.index("<h3>Other changes</h3>")
        )
    ]
    assert "maximum context" in others and "status-tightened" in others
    assert "stage <code>plan_generation</code> budget" in others
    assert "stage <code>ticket_parsing</code>" not in others  # 4K in both: unchanged


def test_an_approval_of_a_limit_edited_after_it_was_read_is_refused(
    client_for, api_for, dropping_successor, members
):
    reviewer = client_for("reviewer")
    page = reviewer.get(f"{BASE}/limits/{dropping_successor.pk}/").content.decode()
    read = re.search(r'name="reviewed" value="([0-9a-f]{16})"', page).group(1)
    # The editor loosens the proposal while the reviewer reads it.
    services.operating_limit_update(
        limit=dropping_successor, actor=members["editor"], source_limits={"system": 9000}
    )
    stale = reviewer.post(
        f"{BASE}/limits/{dropping_successor.pk}/approve/",
        {"confirm": "on", "reviewed": read},
        follow=True,
    )
    assert "changed after you opened it" in stale.content.decode()  # the flash, on the limit
    assert OperatingLimit.objects.get(pk=dropping_successor.pk).status == "proposed"
    api = api_for("reviewer")
    url = f"/api/v1/operating-limits/{dropping_successor.pk}/"
    refused = api.post(f"{url}approve/", {"confirm": True, "reviewed": read}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "review_stale"
    fresh = api.get(url).json()["review"]["digest"]
    assert fresh != read
    approved = api.post(f"{url}approve/", {"confirm": True, "reviewed": fresh}, format="json")
    assert approved.status_code == 200, approved.json()


def _approved_chain(qualification, members, count: int) -> None:
    from governance.models import Membership

    admin = Membership.objects.get(user=members["admin"])
    for n in range(count):
        limit = services.operating_limit_propose(
            qualification=qualification, actor=members["editor"], name=f"Chain {n}", values={}
        )
        services.operating_limit_approve(
            limit=limit, reviewer=members["admin"], membership=admin, confirmed=True,
            comment=f"approved {n}",
        )  # fmt: skip


def test_listing_limits_costs_the_same_queries_for_three_or_nine(
    api_for, loaded_qualification, members
):
    """Each row's approval comment comes from one lookup shared by the page of results, not
    from a query per row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    reviewer = api_for("reviewer")
    counts = []
    for total in (3, 9):
        _approved_chain(loaded_qualification, members, total - OperatingLimit.objects.count())
        reviewer.get("/api/v1/operating-limits/")  # warm: sessions, caches
        with CaptureQueriesContext(connection) as queries:
            response = reviewer.get("/api/v1/operating-limits/")
        assert response.status_code == 200
        counts.append(len(queries))
    rows = response.json()["results"]
    assert sorted(row["approval_comment"] for row in rows) == sorted(
        f"approved {n}" for n in list(range(3)) + list(range(6))
    )
    assert counts[1] == counts[0], counts
