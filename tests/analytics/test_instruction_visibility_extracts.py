"""Instruction-visibility text extracts: written by the task the derive step sends after
ingest (for the sessions it derived), and by the counting job; never by a request. A GET over extracts that are stored,
missing and stale leaves the extract table as it was (rows and contents) and still answers
the counts of an independent reference counter."""

import orjson
import pytest
import zstandard

from tests.analytics.generated_instruction_visibility import (
    INSTRUCTION,
    as_tally,
    plan,
    reference,
    transcripts,
)
from traces.analysis.instruction_visibility import Matcher, normalise
from traces.analytics.instruction_visibility_matching import (
    FACT_COLUMNS,
    VERSION,
    call_facts,
    stale_call_ids,
)
from traces.analytics.models import CallTextExtract
from traces.analytics.selectors import AnalyticsFilters, selected_calls
from traces.models import Call, CallText, Session
from traces.services import ingest_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _extract_after_ingest(settings):
    """As with a broker (the embedded default leaves extracts to the counting job)."""
    settings.GOVERNANCE_EXTRACT_AFTER_INGEST = True


URL = "/api/v1/analytics/instruction-visibility/"
SEEDS = [1, 4, 6]


def _ingest(workspace, files):
    for name, data in files.items():
        ingest_bytes(
            workspace=workspace,
            name=f"{name}.jsonl",
            data=data,
            source="demo",
            refresh_analytics=False,
        )


def _calls(planned) -> int:
    return sum(len(c) for agents in planned.values() for c in agents.values())


def _snapshot(workspace) -> list[tuple]:
    return list(
        CallTextExtract.objects.filter(call__workspace=workspace)
        .order_by("call_id")
        .values_list(
            "call_id",
            "source_bytes",
            "version",
            "thinking",
            "thinking_normalised",
            "thinking_blocks",
            "prompt_normalised",
            "result_normalised",
        )
    )


def _check(body, expected, workspace):
    assert as_tally(body["overall"]) == expected["overall"]
    assert [as_tally(row) for row in body["by_turns"]] == expected["by_bin"]
    external = dict(Session.objects.filter(workspace=workspace).values_list("id", "external_id"))
    got = {external[row["session"]]: as_tally(row) for row in body["by_session"]}
    assert got == expected["by_session"]
    assert body["calls_outside_window"] == expected["outside"]


def _facts(workspace):
    chosen = selected_calls(workspace, AnalyticsFilters())
    sql = [(q.query.sql_with_params()) for q in (chosen.values("id"), chosen.values("agent_id"))]
    facts = call_facts(
        workspace.pk,
        (sql[0][0], list(sql[0][1])),
        (sql[1][0], list(sql[1][1])),
        Matcher(INSTRUCTION),
        deliveries=True,
    )
    return facts[facts[:, 0].argsort()]


def _states(workspace) -> list[int]:
    """Each call's extract state as the count reads it (0 stored and fresh, 1 missing or
    stale, 2 no stored text)."""
    return _facts(workspace)[:, FACT_COLUMNS.index("state")].tolist()


def _states_by_id(workspace) -> list[int]:
    return _states(workspace)  # in call id order


@pytest.mark.parametrize("seed", SEEDS)
def test_after_ingest_task_fills_extracts_whose_counts_equal_the_reference(
    workspace, seed, run_on_commit, api_for
):
    planned = plan(seed)
    with run_on_commit():
        _ingest(workspace, transcripts(planned))
    calls = _calls(planned)
    assert CallTextExtract.objects.filter(call__workspace=workspace).count() == calls
    assert stale_call_ids(workspace.pk) == []
    assert _states(workspace) == [0] * calls  # the count finds every extract stored
    before = _snapshot(workspace)
    response = api_for("viewer").get(URL, {"instruction": INSTRUCTION})
    assert response.status_code == 200, response.content
    _check(response.json(), reference(planned), workspace)
    assert _snapshot(workspace) == before


@pytest.mark.parametrize("seed", SEEDS)
def test_a_get_writes_no_extract_and_answers_the_reference_counts(
    workspace, seed, run_on_commit, api_for
):
    """Extracts stored for most calls, missing for some, stale for others (a changed text,
    an older version): the GET reads them, extracts the rest in memory, stores nothing."""
    planned = plan(seed)
    with run_on_commit():
        _ingest(workspace, transcripts(planned))
    ids = list(Call.objects.filter(workspace=workspace).order_by("id").values_list("id", flat=True))
    CallTextExtract.objects.filter(call_id__in=ids[::5]).delete()  # missing
    # Stale rows, poisoned: were they trusted, their thinking would quote the instruction
    # and their prompt deliver it.
    poison = {
        "thinking": INSTRUCTION,
        "thinking_normalised": normalise(INSTRUCTION),
        "thinking_blocks": 1,
        "prompt_normalised": normalise(INSTRUCTION),
    }
    CallTextExtract.objects.filter(call_id__in=ids[1::7]).update(version=VERSION + 1, **poison)
    # A text rewritten since its extract (stale by its length): same content, one key more.
    changed = ids[3]
    row = CallText.objects.get(call_id=changed)
    text = orjson.loads(zstandard.ZstdDecompressor().decompress(bytes(row.data)))
    text["note"] = "re-stored"
    CallText.objects.filter(call_id=changed).update(
        data=zstandard.ZstdCompressor().compress(orjson.dumps(text))
    )
    CallTextExtract.objects.filter(call_id=changed).update(**poison)
    before = _snapshot(workspace)
    assert 0 < len(before) < len(ids)
    states = dict(zip(ids, _states_by_id(workspace), strict=True))
    assert {states[pk] for pk in ids[::5] + ids[1::7] + [changed]} == {1}
    assert sum(1 for v in states.values() if v == 0) > len(ids) // 2

    response = api_for("viewer").get(URL, {"instruction": INSTRUCTION})
    assert response.status_code == 200, response.content
    assert _snapshot(workspace) == before  # not a row added, removed or changed
    _check(response.json(), reference(planned), workspace)


def test_the_after_ingest_task_extracts_only_the_sessions_just_derived(workspace, run_on_commit):
    """Extracts missing in one session stay missing when another session is ingested: the
    task reads the calls of the sessions its transaction derived, not the workspace's."""
    files = transcripts(plan(SEEDS[0]))
    names = sorted(files)
    assert len(names) >= 2
    with run_on_commit():
        _ingest(workspace, {name: files[name] for name in names[:-1]})
    first = set(Call.objects.filter(workspace=workspace).values_list("id", flat=True))
    CallTextExtract.objects.filter(call_id__in=first).delete()
    with run_on_commit():
        _ingest(workspace, {names[-1]: files[names[-1]]})
    added = set(Call.objects.filter(workspace=workspace).values_list("id", flat=True)) - first
    assert added
    stored = set(CallTextExtract.objects.values_list("call_id", flat=True))
    assert stored == added & set(CallText.objects.values_list("call_id", flat=True))
    assert set(stale_call_ids(workspace.pk)) == first & set(
        CallText.objects.values_list("call_id", flat=True)
    )
    session = Call.objects.filter(pk=min(added)).values_list("session_id", flat=True).get()
    assert stale_call_ids(workspace.pk, [session]) == []


def test_without_a_broker_ingest_leaves_extracts_to_the_count(
    workspace, run_on_commit, settings, api_for
):
    """The embedded default: no task after ingest (it would run inside it); a GET still
    answers the reference counts, in memory, and stores nothing."""
    settings.GOVERNANCE_EXTRACT_AFTER_INGEST = False
    planned = plan(SEEDS[1])
    with run_on_commit():
        _ingest(workspace, transcripts(planned))
    assert not CallTextExtract.objects.exists()
    response = api_for("viewer").get(URL, {"instruction": INSTRUCTION})
    assert response.status_code == 200, response.content
    _check(response.json(), reference(planned), workspace)
    assert not CallTextExtract.objects.exists()
