"""Instruction visibility matched in the database, checked against an independent reference
counter on generated transcripts (by session and by turns since delivery, exact and
normalised); the prefilter's hard cases; the extract kept fresh; the job path through the
API and the page; another workspace's run is a 404."""

import orjson
import pytest
import zstandard
from django.urls import reverse

from governance.models import Job
from tests.analytics.generated_instruction_visibility import (
    INSTRUCTION,
    as_tally,
    plan,
    reference,
    transcripts,
)
from traces.analysis.instruction_visibility import Matcher
from traces.analytics.instruction_visibility_selectors import (
    instruction_visibility_for,
    subject_for,
)
from traces.analytics.models import CallTextExtract, InstructionVisibilityRun
from traces.analytics.selectors import AnalyticsFilters
from traces.models import Call, CallText, Session
from traces.services import ingest_bytes

pytestmark = pytest.mark.django_db
URL = "/api/v1/analytics/instruction-visibility/"
RUNS = URL + "runs/"


def _ingest(workspace, files):
    for name, data in files.items():
        ingest_bytes(
            workspace=workspace,
            name=f"{name}.jsonl",
            data=data,
            source="demo",
            refresh_analytics=False,
        )


def _check(result, expected, workspace):
    assert as_tally(result["overall"]) == expected["overall"]
    assert [as_tally(row) for row in result["by_turns"]] == expected["by_bin"]
    external = dict(Session.objects.filter(workspace=workspace).values_list("id", "external_id"))
    got = {external[row["session"]]: as_tally(row) for row in result["by_session"]}
    assert got == expected["by_session"]
    assert result["calls_outside_window"] == expected["outside"]


SEEDS = [1, 2, 3, 4, 6]  # seed 3: the instruction is never delivered


def test_generated_plans_cover_the_shapes():
    calls = [
        call
        for seed in SEEDS
        for agents in plan(seed).values()
        for agent_calls in agents.values()
        for call in agent_calls
    ]
    assert any(c.lines > 1 for c in calls) and any(not c.request_id for c in calls)
    assert any(not c.message_id for c in calls) and any(c.result_delivers for c in calls)
    assert any(not c.thinking for c in calls) and any(len(c.thinking) > 2 for c in calls)
    assert any(len(agents) > 1 for seed in SEEDS for agents in plan(seed).values())
    counted = [reference(plan(seed))["overall"] for seed in SEEDS]
    assert [c["n"] > 0 for c in counted] == [True, True, False, True, True]
    assert all(c["normalised"] > c["exact"] > 0 for c in counted if c["n"])


@pytest.mark.parametrize("seed", SEEDS)
def test_counts_match_the_reference_counter(workspace, seed):
    planned = plan(seed)
    _ingest(workspace, transcripts(planned))
    expected = reference(planned)
    calls = sum(len(c) for agents in planned.values() for c in agents.values())
    assert Call.objects.filter(workspace=workspace).count() == calls
    subject = subject_for(workspace=workspace, instruction=INSTRUCTION)
    # On request, with nothing extracted: every text extracted in memory, none stored.
    result = instruction_visibility_for(
        workspace=workspace, filters=AnalyticsFilters(), subject=subject
    )
    _check(result, expected, workspace)
    assert not CallTextExtract.objects.filter(call__workspace=workspace).exists()
    # As the job counts: the extracts it makes are stored.
    stored = instruction_visibility_for(
        workspace=workspace, filters=AnalyticsFilters(), subject=subject, store=True
    )
    _check(stored, expected, workspace)
    assert CallTextExtract.objects.filter(call__workspace=workspace).count() == calls
    # Again, with every text already extracted: the same counts, matched in the database.
    again = instruction_visibility_for(
        workspace=workspace, filters=AnalyticsFilters(), subject=subject
    )
    _check(again, expected, workspace)


def _thinking_call(workspace, texts: list[str]):
    """A session whose calls have these thinking texts, delivered from the start."""
    lines = []
    for n, text in enumerate(texts):
        lines.append(
            {"type": "assistant", "sessionId": "tricky", "uuid": f"a{n}", "cwd": "/w",
             "timestamp": f"2026-05-01T09:00:{n:02d}.000Z", "requestId": f"r{n}",
             "message": {"id": f"m{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                         "content": [{"type": "thinking", "thinking": text, "signature": "x"}],
                         "usage": {"input_tokens": 1, "output_tokens": 1}}}
        )  # fmt: skip
    _ingest(workspace, {"tricky": b"\n".join(orjson.dumps(line) for line in lines) + b"\n"})


def test_hard_texts_match_in_the_database_as_in_python(workspace):
    """Texts whose normalised form holds the instruction only through a link, a ligature,
    the Kelvin sign or ß, and one with NUL: the stored normalised text matches as Python
    matches the text itself."""
    instruction = "Keep the fixtures for the Straße tests"
    texts = [
        "keep the ﬁxtures for the straße tests",  # ligature fi
        "KEEP THE [fix](http://x)tures FOR THE STRASSE TESTS",  # link joins the word
        "keep the fixtures for the strasse tests",
        "\u212aeep the fixtures for the Straße tests",  # Kelvin sign
        "keep the fixture for the straße tests",  # no match
        "keep\x00the fixtures for the straße tests",  # NUL: no match
        instruction,
    ]
    matcher = Matcher(instruction)
    _thinking_call(workspace, texts)
    subject = subject_for(workspace=workspace, instruction=instruction, delivery="session_start")
    result = instruction_visibility_for(
        workspace=workspace, filters=AnalyticsFilters(), subject=subject
    )
    overall = result["overall"]
    assert overall["n"] == len(texts)
    assert overall["normalised"]["count"] == sum(matcher.normalised(t) for t in texts) == 5
    assert overall["exact"]["count"] == sum(matcher.exact(t) for t in texts) == 1


def test_changed_text_is_extracted_again(workspace):
    _thinking_call(workspace, ["nothing here", "nothing either"])
    subject = subject_for(workspace=workspace, instruction=INSTRUCTION, delivery="session_start")
    first = instruction_visibility_for(
        workspace=workspace, filters=AnalyticsFilters(), subject=subject
    )
    assert first["overall"]["exact"]["count"] == 0
    call = Call.objects.get(workspace=workspace, session_index=1)
    text = {"blocks": [{"type": "thinking", "text": f"Recall: {INSTRUCTION}"}]}
    CallText.objects.filter(call=call).update(
        data=zstandard.ZstdCompressor().compress(orjson.dumps(text))
    )
    second = instruction_visibility_for(
        workspace=workspace, filters=AnalyticsFilters(), subject=subject
    )
    assert second["overall"]["exact"]["count"] == 1


def test_too_many_calls_on_get_queues_nothing_and_post_starts_a_run(
    workspace, api_for, monkeypatch, run_on_commit
):
    planned = plan(5)
    _ingest(workspace, transcripts(planned))
    from traces.analytics import instruction_visibility_selectors as selectors

    # The on-request limit, lowered to 3 calls (the default binds at definition).
    monkeypatch.setattr(
        selectors.instruction_visibility_for,
        "__kwdefaults__",
        {"max_calls": 3, "store": False, "progress": None},
    )
    client = api_for("viewer")
    refused = client.get(URL, {"instruction": INSTRUCTION})
    assert refused.status_code == 400, refused.content
    assert "POST /api/v1/analytics/instruction-visibility/runs/" in refused.content.decode()
    assert not Job.objects.filter(kind="instruction_visibility").exists()
    with run_on_commit():
        started = client.post(RUNS, {"instruction": INSTRUCTION}, format="json")
    assert started.status_code == 202, started.content
    run_id = started.json()["id"]
    # Tasks run in process here: the run is done when the POST returns.
    body = client.get(f"{RUNS}{run_id}/").json()
    assert body["job"]["status"] == "succeeded"
    assert body["job"]["progress_done"] == body["job"]["progress_total"]
    expected = reference(planned)
    assert as_tally(body["result"]["overall"]) == expected["overall"]
    assert [as_tally(r) for r in body["result"]["by_turns"]] == expected["by_bin"]


def test_bad_run_request_names_the_field(workspace, api_for):
    response = api_for("viewer").post(RUNS, {"delivery": "nowhere"}, format="json")
    assert response.status_code == 400
    assert not InstructionVisibilityRun.objects.exists()


def test_another_workspaces_run_is_a_404(workspace, other_workspace, api_for, members, client):
    _ingest(workspace, transcripts(plan(6)))
    run = api_for("viewer").post(RUNS, {"instruction": INSTRUCTION}, format="json").json()
    from governance.models import Role
    from governance.services import membership_set

    membership_set(workspace=other_workspace, user=members["admin"], role=Role.ADMIN)
    foreign = api_for("admin", target_workspace=other_workspace)
    assert foreign.get(f"{RUNS}{run['id']}/").status_code == 404
    client.force_login(members["admin"])
    page = reverse("analytics:instruction_visibility", args=[other_workspace.slug])
    assert client.get(page, {"run": run["id"]}).status_code == 404
    own = reverse("analytics:instruction_visibility", args=[workspace.slug])
    assert client.get(own, {"run": run["id"]}).status_code == 200


def test_page_post_starts_a_run_and_shows_its_counts(workspace, members, client, run_on_commit):
    planned = plan(7)
    _ingest(workspace, transcripts(planned))
    client.force_login(members["viewer"])
    url = reverse("analytics:instruction_visibility", args=[workspace.slug])
    with run_on_commit():
        response = client.post(url, {"instruction": INSTRUCTION, "project": ""})
    assert response.status_code == 302
    run = InstructionVisibilityRun.objects.get(workspace=workspace)
    assert f"run={run.pk}" in response["Location"]
    page = client.get(response["Location"]).content.decode()
    expected = reference(planned)["overall"]
    assert f"{expected['exact']} of n = {expected['n']}" in page
    assert "Absence from visible reasoning does not prove" in page


def test_the_schema_documents_the_job(api_for):
    schema = api_for("viewer").get("/api/schema/?format=json").json()

    def text(path, method):
        return " ".join(schema["paths"][path][method]["description"].split())

    caveat = "does not prove that the instruction had no influence"
    assert "queues nothing" in text(URL, "get") and caveat in text(URL, "get")
    assert "progress_total" in text(RUNS, "post") and caveat in text(RUNS, "post")
    assert "202" in schema["paths"][RUNS]["post"]["responses"]
    (run_path,) = [p for p in schema["paths"] if p.startswith(RUNS + "{")]
    assert "null until the job has succeeded" in text(run_path, "get")
