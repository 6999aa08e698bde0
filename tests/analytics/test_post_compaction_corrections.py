"""Every counted correction after compaction, exported for audit (the CSV streamed from the
page, the paged API), against a reference written here from the ORM: the observed runs,
their calls in agent order up to MAX_STEP, each operator prompt matched with PhraseMatcher.
The corpus has more corrections than the cached section keeps (MAX_MATCHES), so the export
must read the stored matches, not the section; stale stored matches are matched for the
export without writing anything."""

import csv
import io
import random

import pytest
from django.db import connection
from django.test import Client

from tests.analytics.planted_post_compaction import plant
from tests.analytics.test_post_compaction import _codex_rollout
from tests.analytics.test_post_compaction_fast_path import _ingest
from traces.analysis.post_compaction import (
    DEFAULT_PHRASES,
    MAX_STEP,
    PhraseMatcher,
    post_compaction,
)
from traces.analytics.post_compaction_corrections import CHUNK, corrections_for
from traces.analytics.post_compaction_grouped import corpus_load_grouped
from traces.analytics.post_compaction_rows import Rematched, corpus_load_rows
from traces.analytics.post_compaction_selectors import MAX_MATCHES
from traces.analytics.post_compaction_services import (
    correction_phrases_save,
    post_compaction_section,
)
from traces.analytics.selectors import AnalyticsFilters
from traces.models import Call, OperatorPrompt, Run, Session
from traces.services import ingest_bytes

pytestmark = pytest.mark.django_db
ALL = AnalyticsFilters()
FIELDS = ("session", "call_index", "run", "step", "trigger", "task_type", "phrase", "matched")


def reference_rows(workspace, phrases, task_type: str = "") -> list[dict]:
    """Each counted correction, found row by row from the ORM, in session and call order."""
    matcher = PhraseMatcher(phrases)
    runs = Run.objects.filter(
        workspace=workspace, started_by__kind="full", agent__kind="main"
    ).select_related("started_by")
    if task_type:
        runs = runs.filter(task_type=task_type)
    prompts = dict(
        OperatorPrompt.objects.filter(call__workspace=workspace).values_list("call_id", "text")
    )
    rows = []
    for run in runs:
        calls = Call.objects.filter(
            agent_id=run.agent_id,
            session_index__gte=run.first_call_index,
            session_index__lte=run.last_call_index,
        ).order_by("agent_index")
        for step, call in enumerate(calls[:MAX_STEP], start=1):
            if call.prompt_kind != "operator" or call.pk not in prompts:
                continue
            found = matcher.match(prompts[call.pk])
            if found is None:
                continue
            rows.append(
                {
                    "session": run.session_id,
                    "call_index": call.session_index,
                    "run": run.pk,
                    "step": step,
                    "trigger": run.started_by.trigger,
                    "task_type": run.task_type,
                    "phrase": found[0],
                    "matched": found[1],
                    "call": call.pk,
                    "prompt": prompts[call.pk],
                }
            )
    return sorted(rows, key=lambda r: (r["session"], r["call_index"]))


def _csv(client, workspace, query: str = "") -> list[dict]:
    response = client.get(f"/w/{workspace.slug}/analytics/post-compaction/corrections.csv{query}")
    assert response.status_code == 200
    assert response.streaming
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def _same(exported: list[dict], reference: list[dict], *, match: str) -> None:
    """The exported rows are the reference's, field by field (CSV values are text)."""
    assert len(exported) == len(reference)
    for row, expected in zip(exported, reference, strict=True):
        assert {k: str(row[k]) for k in FIELDS} == {k: str(expected[k]) for k in FIELDS}
        assert str(row["call"]) == str(expected["call"])
        assert row["match"] == match
        assert row["excerpt"] == expected["prompt"]  # short prompts: the whole message


def _calls(workspace) -> list[tuple]:
    return list(
        Call.objects.filter(workspace=workspace)
        .order_by("pk")
        .values_list("pk", "correction_phrase", "correction_key", "prompt_kind")
    )


@pytest.fixture
def big(workspace, other_workspace):
    """More corrections than the section keeps: the planted corpus (two task types, both
    triggers, phrases in messages that are not counted), and generated transcripts of
    several shapes and prompts (long runs, sidechains, no compaction); some for the other
    workspace."""
    for name, lines in plant(auto=70, manual=30, seed=18).sessions.items():
        ingest_bytes(workspace=workspace, name=f"{name}.jsonl", data=b"\n".join(lines) + b"\n",
                     source="demo", refresh_analytics=False)  # fmt: skip
    _ingest(workspace, range(10), random.Random(18))
    ingest_bytes(workspace=workspace, name="rollout-2026-03-02T10-00-00-019c8a59.jsonl",
                 data=_codex_rollout(40, {1, 2, 30}), source="demo", refresh_analytics=False)  # fmt: skip
    _ingest(other_workspace, range(3), random.Random(19))


def test_every_counted_correction_is_exported(
    workspace, other_workspace, big, client_for, api_for, members, outsider
):
    reference = reference_rows(workspace, DEFAULT_PHRASES)
    section = post_compaction_section(workspace=workspace, filters=ALL)
    # The corpus has what the test is for: more than the section keeps, varied phrases.
    assert section["matches_total"] == len(reference) > max(MAX_MATCHES, CHUNK)
    assert len(section["matches"]) == MAX_MATCHES
    assert len({r["phrase"] for r in reference}) >= 3
    assert {r["task_type"] for r in reference} >= {"building", "code_understanding"}
    assert {r["trigger"] for r in reference} >= {"auto", "manual"}

    before = _calls(workspace)
    viewer = client_for("viewer")
    exported = _csv(viewer, workspace)
    _same(exported, reference, match="stored")
    assert set(exported[0]) >= {"session", "call_index", "run", "step", "trigger", "task_type",
                                "phrase", "matched", "excerpt", "phrase_list_version"}  # fmt: skip
    assert {row["phrase_list_version"] for row in exported} == {"1"}
    # The section's kept rows are among them.
    keys = {(row["session"], row["call_index"]) for row in exported}
    assert {(str(m["session"]), str(m["call_index"])) for m in section["matches"]} <= keys
    # Nothing of the other workspace.
    theirs = set(Session.objects.filter(workspace=other_workspace).values_list("pk", flat=True))
    assert theirs and not {int(row["session"]) for row in exported} & theirs

    # By task type: the section's count, the reference's rows.
    for task_type in ("building", "code_understanding"):
        filters = AnalyticsFilters(task_type=task_type)
        wanted = reference_rows(workspace, DEFAULT_PHRASES, task_type)
        assert 0 < len(wanted) < len(reference)
        assert post_compaction_section(workspace=workspace, filters=filters)["matches_total"] == (
            len(wanted)
        )
        _same(_csv(viewer, workspace, f"?task_type={task_type}"), wanted, match="stored")

    # The other filters: as many rows as the section counts with them.
    for query in ("harness=claude-code", "harness=codex", "started_after=2026-04-01",
                  "started_before=2026-03-31", "project=demo", "exclude_forks=on"):  # fmt: skip
        key, value = query.split("=")
        fields = {key: value == "on" if key == "exclude_forks" else value}
        counted = post_compaction_section(workspace=workspace, filters=AnalyticsFilters(**fields))
        rows = _csv(viewer, workspace, f"?{query}")
        assert len(rows) == counted["matches_total"] > 0, query
        assert {(r["session"], r["call_index"]) for r in rows} <= keys
    codex = Session.objects.get(workspace=workspace, harness="codex").pk
    assert str(codex) in {r["session"] for r in _csv(viewer, workspace, "?harness=codex")}
    assert str(codex) not in {r["session"] for r in _csv(viewer, workspace, "?harness=claude-code")}

    # The API: pages add up to every correction, in the same order.
    api = api_for("viewer")
    url = "/api/v1/analytics/post-compaction/corrections/"
    first = api.get(url).json()
    assert first["count"] == len(reference)
    assert len(first["results"]) == 50 and first["previous"] is None
    assert first["phrase_list_version"] == 1 and first["matched_now"] == 0
    paged, page = [], 1
    while True:
        body = api.get(url, {"page_size": 1000, "page": page}).json()
        assert body["count"] == len(reference)
        paged += body["results"]
        if body["next"] is None:
            break
        page += 1
    assert page == -(-len(reference) // 1000)
    assert len(body["results"]) == len(reference) - 1000 * (page - 1)
    _same(paged, reference, match="stored")
    assert api.get(url, {"page_size": 1000, "page": page + 1}).status_code == 404
    typed = api.get(url, {"task_type": "building"}).json()
    assert typed["count"] == len(reference_rows(workspace, DEFAULT_PHRASES, "building"))
    assert api.get(url, {"task_type": "cooking"}).status_code == 400

    # Another workspace's: 404 for a non-member; its own member sees only its own.
    assert (
        client_for("viewer")
        .get(f"/w/{other_workspace.slug}/analytics/post-compaction/corrections.csv")
        .status_code
        == 404
    )
    assert api.get(url, HTTP_X_WORKSPACE=other_workspace.slug).json()["count"] == len(reference)
    session_api = client_for("viewer")
    assert session_api.get(url, HTTP_X_WORKSPACE=other_workspace.slug).status_code == 404
    outside = Client()
    outside.force_login(outsider)  # an admin of the other workspace only
    own = outside.get(url, {"page_size": 1000}, HTTP_X_WORKSPACE=other_workspace.slug).json()
    assert own["count"] == len(reference_rows(other_workspace, DEFAULT_PHRASES)) > 0
    assert {row["session"] for row in own["results"]} <= theirs
    assert _calls(workspace) == before  # reading wrote nothing


def test_stale_matches_are_matched_for_the_export_without_writing(
    workspace, big, client_for, api_for
):
    """Some stored matches made under another list, some never made, with prompts edited
    in place so that they now match otherwise; then a new phrase list (every match stale)."""
    post_compaction_section(workspace=workspace, filters=ALL)
    corrected = list(
        OperatorPrompt.objects.filter(call__workspace=workspace, text__startswith="No, that")
        .order_by("call_id")
        .values_list("call_id", flat=True)[:40]
    )
    plain = list(
        OperatorPrompt.objects.filter(call__workspace=workspace, text__startswith="Now update")
        .order_by("call_id")
        .values_list("call_id", flat=True)[:40]
    )
    OperatorPrompt.objects.filter(call_id__in=corrected).update(text="Carry on, thanks.")
    OperatorPrompt.objects.filter(call_id__in=plain).update(text="Please revert that.")
    Call.objects.filter(pk__in=corrected).update(correction_key=12345)
    Call.objects.filter(pk__in=plain).update(correction_key=None, correction_phrase=None)
    reference = reference_rows(workspace, DEFAULT_PHRASES)
    stale = set(corrected) | set(plain)
    assert {r["call"] for r in reference} & set(plain)  # some now count
    assert not {r["call"] for r in reference} & set(corrected)  # and some no longer

    before = _calls(workspace)
    viewer = client_for("viewer")
    exported = _csv(viewer, workspace)
    assert len(exported) == len(reference)
    for row, expected in zip(exported, reference, strict=True):
        assert {k: str(row[k]) for k in FIELDS} == {k: str(expected[k]) for k in FIELDS}
        assert row["match"] == ("matched now" if expected["call"] in stale else "stored")
    api = api_for("viewer")
    url = "/api/v1/analytics/post-compaction/corrections/"
    body = api.get(url, {"page_size": 1000}).json()
    assert body["count"] == len(reference)
    assert body["matched_now"] == len({r["call"] for r in reference} & stale)
    assert _calls(workspace) == before  # nothing stored on GET
    # The job then stores them, and its count is the export's.
    assert post_compaction_section(workspace=workspace, filters=ALL)["matches_total"] == len(
        reference
    )

    # A new list: every stored match is stale until the job runs again.
    phrases = ["carry on", "revert", "i told you"]
    correction_phrases_save(workspace=workspace, phrases=phrases, actor=None)
    reference = reference_rows(workspace, phrases)
    assert len({r["phrase"] for r in reference}) == 3
    before = _calls(workspace)
    exported = _csv(viewer, workspace)
    _same(exported, reference, match="matched now")
    assert {row["phrase_list_version"] for row in exported} == {"2"}
    body = api.get(url, {"page_size": 1000}).json()
    assert body["count"] == body["matched_now"] == len(reference)
    assert body["phrase_list_version"] == 2
    assert _calls(workspace) == before
    assert post_compaction_section(workspace=workspace, filters=ALL)["matches_total"] == len(
        reference
    )
    assert len(corrections_for(workspace=workspace, filters=ALL)) == len(reference)
    assert _csv(viewer, workspace)[0]["match"] == "stored"


def test_invalid_filters_are_refused(workspace, client_for, api_for):
    response = client_for("viewer").get(
        f"/w/{workspace.slug}/analytics/post-compaction/corrections.csv?task_type=cooking"
    )
    assert response.status_code == 400
    assert "task_type" in response.content.decode()
    body = api_for("viewer").get(
        "/api/v1/analytics/post-compaction/corrections/", {"started_after": "yesterday"}
    )
    assert body.status_code == 400 and "started_after" in body.json()
    empty = api_for("viewer").get("/api/v1/analytics/post-compaction/corrections/").json()
    assert (empty["count"], empty["results"]) == (0, [])


def test_openapi_describes_the_list(client_for):
    schema = client_for("viewer").get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/analytics/post-compaction/corrections/"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"page", "page_size", "task_type", "harness", "project", "model"} <= names
    assert "band" not in names  # parameters of other analyses are not offered
    paged = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][paged.rsplit("/", 1)[1]]
    assert {"count", "next", "results", "phrase_list_version", "matched_now"} <= set(
        body["properties"]
    )
    row = schema["components"]["schemas"]["Correction"]["properties"]
    assert set(row) == {"session", "call_index", "call", "run", "step", "trigger", "task_type",
                        "phrase", "matched", "excerpt", "match"}  # fmt: skip


def test_grouped_audit_rows_equal_the_row_by_row_ones_past_the_cap(workspace, big):
    """The grouped statement returns one by one only the stale prompts and the first
    MAX_MATCHES current corrections: with more corrections than that, and stale matches
    spread over the runs, its section (audit rows included) is the row-by-row one."""
    if connection.vendor != "postgresql":
        pytest.skip("the grouped statement is PostgreSQL's")
    matcher = PhraseMatcher(DEFAULT_PHRASES)
    operator = list(
        Call.objects.filter(workspace=workspace, prompt_kind="operator")
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    rng = random.Random(7)
    Call.objects.filter(pk__in=rng.sample(operator, 300)).update(correction_key=99)
    Call.objects.filter(pk__in=rng.sample(operator, 200)).update(
        correction_key=None, correction_phrase=None
    )
    sections = {}
    for name, load in (("grouped", corpus_load_grouped), ("rows", corpus_load_rows)):
        for mode in ("stale", "everything"):
            rematched = Rematched(matcher.key) if mode == "stale" else None
            corpus = load(workspace=workspace, filters=ALL, matcher=matcher, rematched=rematched)
            sections[(name, mode)] = (
                post_compaction(corpus, phrase_version=1, bootstrap=200),
                sorted(zip(rematched.calls, rematched.phrases, strict=True)) if rematched else None,
            )
    reference = reference_rows(workspace, DEFAULT_PHRASES)
    first, rematched_calls = sections[("grouped", "stale")]
    assert first["matches_total"] == len(reference) > MAX_MATCHES
    assert len(first["matches"]) == MAX_MATCHES
    assert rematched_calls and len(rematched_calls) < 500  # only the observed stale ones
    assert all(
        section == sections[("grouped", "stale")] for section in (sections[("rows", "stale")],)
    )
    assert sections[("grouped", "everything")][0] == sections[("rows", "everything")][0] == first
