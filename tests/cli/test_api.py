"""The two endpoints the command uses: the active limit for a harness model id, and hooks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from traces.models import Compaction, Harness, HookEvent, Session

pytestmark = pytest.mark.django_db

ACTIVE = "/api/v1/operating-limits/active/"


def weakest_ecl(limit) -> int:
    justification = limit.justification
    family = next(
        f for f in justification["families"] if f["family"] == justification["weakest_family"]
    )
    return family["ecl_tokens"]


def test_active_limit_matches_a_harness_model_id(approved_limit, api_for):
    api = api_for("viewer")
    for model_id in (
        "claude-sonnet-4-20250514",
        "claude-sonnet-4",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "claude-sonnet-4@20250514",
        "claude-sonnet-4[1m]",
    ):
        answer = api.get(ACTIVE, {"model": model_id}).json()
        assert answer["limit"]["id"] == approved_limit.pk, model_id
    answer = api.get(ACTIVE, {"model": "claude-sonnet-4-20250514"}).json()
    limit = answer["limit"]
    assert answer["candidates"] == 1
    assert answer["version"].startswith(f"{approved_limit.pk}:")
    assert limit["max_context_tokens"] == approved_limit.max_context_tokens
    assert limit["reserve_tokens"] == approved_limit.reserve_tokens
    assert limit["model_name"] == "claude-sonnet-4" and limit["workload"] == "repo"
    assert limit["weakest_family"] == "code_change"
    assert limit["ecl_tokens"] == weakest_ecl(approved_limit) == 32000


def test_active_limit_is_null_for_another_model_and_another_workspace(
    approved_limit, api_for, other_workspace, members
):
    from governance.models import Role
    from governance.services import membership_set

    api = api_for("viewer")
    answer = api.get(ACTIVE, {"model": "claude-sonnet-4-5-20250929"}).json()
    assert answer == {
        "model_id": "claude-sonnet-4-5-20250929",
        "version": "none",
        "candidates": 0,
        "limit": None,
    }
    membership_set(workspace=other_workspace, user=members["viewer"], role=Role.VIEWER)
    elsewhere = api_for("viewer", target_workspace=other_workspace)
    assert elsewhere.get(ACTIVE, {"model": "claude-sonnet-4"}).json()["limit"] is None


def test_active_limit_needs_a_model(api_for):
    response = api_for("viewer").get(ACTIVE)
    assert response.status_code == 400
    assert "model" in response.json()["detail"]


def hook_event(event_id: str, event: str, payload: dict, **extra) -> dict:
    return {
        "event_id": event_id,
        "event": event,
        "occurred_at": "2026-12-03T10:00:00Z",
        "payload": {"session_id": "sess-1", "hook_event_name": event, **payload},
        **extra,
    }


def test_hooks_store_each_event_once_and_put_the_summary_on_the_compaction(
    api_for, workspace, members
):
    session = Session.objects.create(
        workspace=workspace, harness=Harness.CLAUDE_CODE, external_id="sess-1"
    )
    agent = session.agents.create(workspace=workspace, external_id="main")
    older = Compaction.objects.create(
        workspace=workspace, session=session, agent=agent, key="c1", trigger="auto",
        timestamp=datetime(2026, 12, 3, 9, tzinfo=UTC), compact_summary="kept earlier",
    )  # fmt: skip
    latest = Compaction.objects.create(
        workspace=workspace, session=session, agent=agent, key="c2", trigger="auto",
        timestamp=datetime(2026, 12, 3, 9, 30, tzinfo=UTC),
    )  # fmt: skip
    api = api_for("editor")
    events = [
        hook_event("e1", "PreCompact", {"trigger": "auto", "custom_instructions": ""},
                   context_tokens=151_000),
        hook_event("e2", "PostCompact", {"trigger": "auto", "compact_summary": "Kept: API v2."}),
    ]  # fmt: skip
    answer = api.post("/api/v1/hooks/", {"events": events}, format="json")
    assert answer.status_code == 201, answer.json()
    counts = {"received": 2, "stored": 2, "duplicates": 0, "summaries_stored": 1}
    assert answer.json() | counts == answer.json()
    assert answer.json()["answer"]["event_id"] == "e2"  # the batch's last event is answered
    again = api.post("/api/v1/hooks/", {"events": events}, format="json").json()
    counts = {"received": 2, "stored": 0, "duplicates": 2, "summaries_stored": 0}
    assert again | counts == again
    latest.refresh_from_db()
    older.refresh_from_db()
    assert latest.compact_summary == "Kept: API v2."
    assert older.compact_summary == "kept earlier"
    pre = HookEvent.objects.get(event_id="e1")
    assert (pre.event, pre.trigger, pre.context_tokens, pre.session) == (
        "PreCompact", "auto", 151_000, session,
    )  # fmt: skip
    post = HookEvent.objects.get(event_id="e2")
    assert post.compaction == latest and post.created_by == members["editor"]
    assert post.payload["compact_summary"] == "Kept: API v2."


def test_hooks_for_a_session_not_ingested_keep_the_payload(api_for, workspace, other_workspace):
    Session.objects.create(
        workspace=other_workspace, harness=Harness.CLAUDE_CODE, external_id="sess-1"
    )  # another workspace's session of the same id is not linked
    event = hook_event("e9", "SessionStart", {"source": "startup", "model": "claude-sonnet-4"})
    answer = api_for("editor").post("/api/v1/hooks/", {"events": [event]}, format="json")
    assert answer.json()["stored"] == 1
    stored = HookEvent.objects.get(event_id="e9")
    assert stored.workspace == workspace and stored.session is None
    assert (stored.session_external_id, stored.trigger) == ("sess-1", "startup")


def test_hooks_need_an_editor_and_valid_events(api_for):
    event = hook_event("e1", "PreCompact", {})
    assert (
        api_for("viewer").post("/api/v1/hooks/", {"events": [event]}, format="json").status_code
        == 403
    )
    bad = {k: v for k, v in event.items() if k != "occurred_at"}
    response = api_for("editor").post("/api/v1/hooks/", {"events": [bad]}, format="json")
    assert response.status_code == 400
    assert "occurred_at" in str(response.json())
    assert not HookEvent.objects.exists()


def test_several_workloads_give_the_strictest_unless_one_is_named(
    approved_limit, api_for, make_qualification, planted_rows, members, run_on_commit
):
    from governance.models import Membership
    from qualification import services
    from tests.qualification.conftest import to_csv

    docs = make_qualification(
        name="Sweep docs",
        model={"name": "claude-sonnet-4", "version": "2025-05-14"},
        workload={"name": "docs", "version": "1", "families": ["retrieval", "code_change"]},
    )
    with run_on_commit():
        services.trial_batch_submit(
            qualification=docs, content=to_csv(planted_rows), filename="sweep.csv",
            actor=members["editor"], run_now=True,
        )  # fmt: skip
    half = approved_limit.max_context_tokens // 2
    stricter = services.operating_limit_propose(
        qualification=docs,
        actor=members["editor"],
        name="Docs agents",
        values={
            "max_context_tokens": half,
            "reserve_tokens": half // 4,
            "max_initial_assembly_tokens": half // 4,
        },
    )
    services.operating_limit_approve(
        limit=stricter,
        reviewer=members["admin"],
        membership=Membership.objects.get(user=members["admin"]),
        confirmed=True,
    )
    api = api_for("viewer")
    answer = api.get(ACTIVE, {"model": "claude-sonnet-4"}).json()
    assert answer["candidates"] == 2
    assert answer["limit"]["id"] == stricter.pk and answer["limit"]["workload"] == "docs"
    assert answer["limit"]["max_context_tokens"] == half
    named = api.get(ACTIVE, {"model": "claude-sonnet-4", "workload": "repo"}).json()
    assert named["candidates"] == 1 and named["limit"]["id"] == approved_limit.pk
    docs_answer = api.get(ACTIVE, {"model": "claude-sonnet-4", "workload": "docs"}).json()
    assert docs_answer["limit"]["id"] == stricter.pk
