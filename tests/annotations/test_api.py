"""The annotations API: fixed names and shapes, 400s that name the field, roles, isolation,
queues and the aggregates by band (with values)."""

import pytest
from rest_framework.test import APIClient

from governance.models import AuditEvent
from governance.services import api_token_create
from tests.annotations.conftest import call_in, main_run, mark_payload
from traces.annotations import services
from traces.annotations.models import Divergence
from traces.models import Agent, AgentKind, Run

pytestmark = pytest.mark.django_db


def test_create_then_replace_keeps_history(api_for, small_session):
    api = api_for("reviewer")
    run = main_run(small_session)
    step = call_in(run, 6)
    evidence = call_in(run, 2).session_index
    created = api.post(
        "/api/v1/divergences/",
        mark_payload(small_session, step.session_index, evidence_call_indexes=[evidence]),
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["run"] == run.pk and body["agent"] == run.agent_id
    assert body["context_tokens"] == step.context_tokens and body["model"] == step.model
    assert body["failure_class"] == "forgotten_constraint" and body["current"] is True
    assert body["evidence_call_indexes"] == [evidence] and body["replaces"] is None
    assert body["viewer_url"].endswith(f"?at={step.session_index}#step-{step.session_index}")
    same = api.post(
        "/api/v1/divergences/",
        mark_payload(small_session, step.session_index, evidence_call_indexes=[evidence]),
        format="json",
    )
    assert same.status_code == 200 and same.json()["id"] == body["id"]
    replaced = api.post(
        "/api/v1/divergences/",
        mark_payload(
            small_session,
            call_in(run, 8).session_index,
            failure_class="repetition",
            agent=run.agent_id,
        ),
        format="json",
    )
    assert replaced.status_code == 201 and replaced.json()["replaces"] == body["id"]
    listing = api.get("/api/v1/divergences/", {"session": small_session.pk}).json()
    assert [m["id"] for m in listing["results"]] == [replaced.json()["id"]]
    history = api.get(
        "/api/v1/divergences/", {"session": small_session.pk, "current": "false"}
    ).json()
    assert {m["id"]: m["current"] for m in history["results"]} == {
        body["id"]: False,
        replaced.json()["id"]: True,
    }


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"call_index": 10**6}, "call_index", "outside session"),
        ({"failure_class": "bad_luck"}, "failure_class", "Unknown class 'bad_luck'"),
        ({"confidence": "sure"}, "confidence", "Unknown confidence 'sure'"),
        (
            {"failure_class": "other", "note": "  "},
            "other_text",
            "Say what went wrong when the class is 'other' (in other_text, or in the note).",
        ),
        (
            {"failure_class": "other", "note": "", "other_text": ""},
            "other_text",
            "Say what went wrong when the class is 'other' (in other_text, or in the note).",
        ),
        ({"call_index": -1}, "call_index", "greater than or equal to 0"),
        ({"evidence_call_indexes": ["x"]}, "evidence_call_indexes", "valid integer"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api_for, small_session, change, field, message):
    run = main_run(small_session)
    payload = mark_payload(small_session, call_in(run, 5).session_index)
    payload.update(change)
    response = api_for("editor").post("/api/v1/divergences/", payload, format="json")
    assert response.status_code == 400, response.content
    assert message in str(response.json()[field])
    assert not Divergence.objects.exists()


def test_other_takes_the_note_when_other_text_is_absent(api_for, small_session):
    """The issue's fixed shape has `note` and no `other_text`: for class 'other' the note is
    the 'other' text. Given, other_text wins; a long note is cut to 500 characters."""
    api = api_for("editor")
    run = main_run(small_session)
    step = call_in(run, 5).session_index
    payload = {
        "session": small_session.pk,
        "agent": None,
        "call_index": step,
        "failure_class": "other",
        "note": "  Gave up and rewrote the module  ",
        "evidence_call_indexes": [],
        "confidence": "low",
    }  # exactly the keys
    created = api.post("/api/v1/divergences/", payload, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["failure_class"], body["other_text"], body["note"]) == (
        "other",
        "Gave up and rewrote the module",
        "Gave up and rewrote the module",
    )
    stored = Divergence.objects.get(pk=body["id"])
    assert stored.class_label == "Other: Gave up and rewrote the module"
    # The same payload again is the same mark, unchanged.
    again = api.post("/api/v1/divergences/", payload, format="json")
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    explicit = api.post(
        "/api/v1/divergences/",
        {**payload, "other_text": "Rewrite instead of fix", "note": "long story"},
        format="json",
    )
    assert explicit.status_code == 201
    assert (explicit.json()["other_text"], explicit.json()["note"]) == (
        "Rewrite instead of fix",
        "long story",
    )
    long_note = "word " * 300  # 1,500 characters
    cut = api.post(
        "/api/v1/divergences/", {**payload, "note": long_note, "other_text": ""}, format="json"
    )
    assert cut.status_code == 201, cut.content
    other_text = cut.json()["other_text"]
    assert len(other_text) == 500 and other_text.endswith("…")
    assert other_text[:-1] == long_note.strip()[:499]
    assert cut.json()["note"] == long_note.strip()
    # A class other than 'other' keeps no other_text, whatever the note says.
    plain = api.post(
        "/api/v1/divergences/", {**payload, "failure_class": "repetition"}, format="json"
    )
    assert plain.status_code == 201 and plain.json()["other_text"] == ""


def test_evidence_and_run_and_agent_errors(api_for, small_session):
    api = api_for("editor")
    run = main_run(small_session)
    step = call_in(run, 5).session_index
    after = api.post(
        "/api/v1/divergences/",
        mark_payload(small_session, step, evidence_call_indexes=[step + 1]),
        format="json",
    )
    assert (
        after.status_code == 400
        and "before the divergence" in after.json()["evidence_call_indexes"][0]
    )
    other_run = Run.objects.filter(session=small_session).exclude(pk=run.pk).first()
    outside = api.post(
        "/api/v1/divergences/", mark_payload(small_session, step, run=other_run.pk), format="json"
    )
    assert outside.status_code == 400 and "outside run" in outside.json()["call_index"][0]
    sub = Agent.objects.filter(session=small_session, kind=AgentKind.SUBAGENT).first()
    wrong_agent = api.post(
        "/api/v1/divergences/", mark_payload(small_session, step, agent=sub.pk), format="json"
    )
    assert wrong_agent.status_code == 400 and "another agent" in wrong_agent.json()["call_index"][0]
    unknown_agent = api.post(
        "/api/v1/divergences/", mark_payload(small_session, step, agent=10**9), format="json"
    )
    assert (
        unknown_agent.status_code == 400
        and "not in this session" in unknown_agent.json()["agent"][0]
    )
    assert not Divergence.objects.exists()


def test_roles_and_isolation(api_for, small_session, other_session, members, outsider):
    run = main_run(small_session)
    payload = mark_payload(small_session, call_in(run, 5).session_index)
    assert api_for("viewer").post("/api/v1/divergences/", payload, format="json").status_code == 403
    foreign = mark_payload(other_session, 0)
    response = api_for("admin").post("/api/v1/divergences/", foreign, format="json")
    assert response.status_code == 404
    assert (
        api_for("viewer").get("/api/v1/divergences/", {"session": other_session.pk}).status_code
        == 404
    )
    mine = services.divergence_mark(
        session=small_session, annotator=members["editor"], call_index=call_in(run, 5).session_index,
        failure_class="repetition", confidence="low",
    )  # fmt: skip
    assert api_for("viewer").get(f"/api/v1/divergences/{mine.pk}/").status_code == 200
    # The outsider's own token works only in their own workspace, where the mark does not exist.
    issued = api_token_create(workspace=other_session.workspace, user=outsider, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    assert client.get(f"/api/v1/divergences/{mine.pk}/").status_code == 404
    assert client.get("/api/v1/divergences/").json()["count"] == 0


def test_adjudication_and_run_agreement(api_for, small_session, members):
    run = main_run(small_session)
    a = services.divergence_mark(
        session=small_session, annotator=members["editor"], call_index=call_in(run, 5).session_index,
        failure_class="repetition", confidence="low",
    )  # fmt: skip
    services.divergence_mark(
        session=small_session, annotator=members["reviewer"], call_index=call_in(run, 7).session_index,
        failure_class="repetition", confidence="high",
    )  # fmt: skip
    agreement = (
        api_for("viewer").get("/api/v1/divergences/agreement/", {"run": run.pk, "window": 1}).json()
    )
    assert agreement["n"] == 2 and agreement["step_spread"] == 2
    assert agreement["within_window"] is False and agreement["same_class"] is True
    wider = (
        api_for("viewer").get("/api/v1/divergences/agreement/", {"run": run.pk, "window": 3}).json()
    )
    assert wider["within_window"] is True
    assert (
        api_for("reviewer")
        .post("/api/v1/divergences/adjudicate/", {"run": run.pk, "adopt": a.pk}, format="json")
        .status_code
        == 403
    )
    missing = api_for("admin").post(
        "/api/v1/divergences/adjudicate/", {"run": run.pk}, format="json"
    )
    assert missing.status_code == 400 and set(missing.json()) == {
        "call_index",
        "failure_class",
        "confidence",
    }
    final = api_for("admin").post(
        "/api/v1/divergences/adjudicate/", {"run": run.pk, "adopt": a.pk}, format="json"
    )
    assert final.status_code == 201 and final.json()["kind"] == "adjudication"
    assert final.json()["based_on"] == a.pk
    listing = (
        api_for("viewer")
        .get("/api/v1/divergences/", {"run": run.pk, "kind": "adjudication"})
        .json()
    )
    assert listing["count"] == 1


def test_divergence_by_band_counts_resolved_runs(api_for, small_session, members):
    runs = list(
        Run.objects.filter(session=small_session, agent__kind=AgentKind.MAIN).order_by("index")
    )[:3]
    contexts = []
    for number, run in enumerate(runs):
        call = call_in(run, 2)
        contexts.append(call.context_tokens)
        services.divergence_mark(
            session=small_session, annotator=members["editor"], call_index=call.session_index,
            failure_class=["repetition", "retrieval_failure", "repetition"][number], confidence="low",
        )  # fmt: skip
    # A disagreeing second annotator on the first run: it becomes disputed.
    services.divergence_mark(
        session=small_session, annotator=members["reviewer"], call_index=call_in(runs[0], 30).session_index,
        failure_class="harness_truncation", confidence="low",
    )  # fmt: skip
    body = (
        api_for("viewer")
        .get("/api/v1/analytics/divergence-by-band/", {"band_width": 10_000})
        .json()
    )
    assert body["band_width"] == 10_000 and body["basis"] == "resolved"
    assert body["n"] == 2 and body["runs"] == 3 and body["disputed_runs"] == 1
    assert body["resolution"] == {"single": 2}
    counted = {}
    for band in body["bands"]:
        assert band["n"] == sum(band["counts"].values())
        assert band["upper"] - band["lower"] == 10_000
        for slug, count in band["counts"].items():
            if count:
                counted[(band["lower"], slug)] = count
    expected = {}
    for context, slug in ((contexts[1], "retrieval_failure"), (contexts[2], "repetition")):
        key = (context // 10_000 * 10_000, slug)
        expected[key] = expected.get(key, 0) + 1
    assert counted == expected
    totals = {c["slug"]: c["total"] for c in body["classes"]}
    assert len(totals) == 10 and totals["repetition"] == 1 and totals["retrieval_failure"] == 1
    every = (
        api_for("viewer").get("/api/v1/analytics/divergence-by-band/", {"basis": "marks"}).json()
    )
    assert every["n"] == 4
    bad = api_for("viewer").get("/api/v1/analytics/divergence-by-band/", {"band_width": "wide"})
    assert bad.status_code == 400 and "band_width" in bad.json()
    lab = (
        api_for("viewer")
        .get("/api/v1/analytics/divergence-vs-lab/", {"model": runs[0].session.model_names[0]})
        .json()
    )
    assert lab["verdict"] == "no_qualification" and len(lab["contexts"]) == 2


def test_queue_api_build_next_finish(api_for, small_session, members):
    reviewer = api_for("reviewer")
    payload = {
        "name": "API queue",
        "filter": {"agent_kind": "main", "min_context": 1000},
        "sample_size": 2,
        "annotators": ["reviewer-a", "editor-a"],
        "annotators_per_run": 2,
        "seed": 3,
    }
    assert (
        api_for("editor").post("/api/v1/annotation-queues/", payload, format="json").status_code
        == 403
    )
    unknown = reviewer.post(
        "/api/v1/annotation-queues/", {**payload, "annotators": ["nobody"]}, format="json"
    )
    assert unknown.status_code == 400 and "nobody" in unknown.json()["annotators"][0]
    created = reviewer.post("/api/v1/annotation-queues/", payload, format="json")
    assert created.status_code == 201, created.content
    queue = created.json()
    assert queue["criteria"] == {"agent_kind": "main", "min_context": 1000}
    assert queue["annotators"] == ["editor-a", "reviewer-a"] and queue["seed"] == 3
    first = reviewer.get(f"/api/v1/annotation-queues/{queue['id']}/next/")
    assert first.status_code == 200 and first.json()["position"] == 0
    assert (
        reviewer.post(f"/api/v1/annotation-queues/{queue['id']}/next/").json()["run"]
        == first.json()["run"]
    )
    assert (
        api_for("viewer").get(f"/api/v1/annotation-queues/{queue['id']}/next/").status_code == 403
    )
    assert api_for("admin").get(f"/api/v1/annotation-queues/{queue['id']}/next/").status_code == 403
    done = reviewer.post(
        f"/api/v1/annotation-queues/{queue['id']}/finish/",
        {"outcome": "no_divergence"},
        format="json",
    )
    assert done.status_code == 200
    second = reviewer.get(f"/api/v1/annotation-queues/{queue['id']}/next/").json()
    assert second["position"] == 1
    skip = reviewer.post(
        f"/api/v1/annotation-queues/{queue['id']}/finish/", {"outcome": "skip"}, format="json"
    )
    assert skip.status_code == 200
    assert reviewer.get(f"/api/v1/annotation-queues/{queue['id']}/next/").status_code == 204
    nothing = reviewer.post(
        f"/api/v1/annotation-queues/{queue['id']}/finish/", {"outcome": "skip"}, format="json"
    )
    assert nothing.status_code == 400 and "no open run" in nothing.json()["run"][0]
    detail = api_for("viewer").get(f"/api/v1/annotation-queues/{queue['id']}/").json()
    assert detail["progress"]["finished"] == 1 and detail["progress"]["places"] == 4
    assert detail["kappa"]["kappa"] is None and detail["kappa"]["reason"]
    closed = reviewer.post(
        f"/api/v1/annotation-queues/{queue['id']}/status/", {"status": "closed"}, format="json"
    )
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    assert (
        api_for("editor").get(f"/api/v1/annotation-queues/{queue['id']}/next/").status_code == 400
    )
    assert AuditEvent.objects.filter(action="annotation_queue.close").count() == 1


def test_openapi_schema_documents_the_endpoints(client_for):
    schema = client_for("viewer").get("/api/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    for path in (
        "/api/v1/divergences/",
        "/api/v1/divergences/adjudicate/",
        "/api/v1/divergences/agreement/",
        "/api/v1/analytics/divergence-by-band/",
        "/api/v1/analytics/divergence-vs-lab/",
        "/api/v1/annotation-queues/",
        "/api/v1/annotation-queues/{id}/next/",
    ):
        assert path in paths, path
    assert paths["/api/v1/divergences/"]["post"]["summary"].startswith("Mark")


def test_every_problem_the_service_finds_is_reported_at_once(api_for, small_session):
    payload = mark_payload(
        small_session, 10**6, failure_class="other", note="", evidence_call_indexes=[10**6 + 1]
    )
    response = api_for("editor").post("/api/v1/divergences/", payload, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert set(errors) == {"call_index", "other_text", "evidence_call_indexes"}
    assert "outside session" in errors["call_index"][0]
    assert "before the divergence" in errors["evidence_call_indexes"][0]
    assert not Divergence.objects.exists()
