"""Behaviour after compaction, end to end: a planted corpus ingested through the real
path, the analytics job, the cached section and the API."""

import json

import pytest

from governance.models import AuditEvent
from tests.analytics.planted_post_compaction import TOOL_ERROR, auto_shape, manual_shape, plant
from traces.analysis.post_compaction import BASELINE_STEPS, BIN_EDGES
from traces.analytics.models import CorrectionPhraseList
from traces.analytics.post_compaction_services import correction_phrases_save
from traces.analytics.selectors import AnalyticsFilters, result_for
from traces.analytics.services import analytics_refresh_queue
from traces.services import ingest_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def planted(workspace, run_on_commit):
    corpus = plant()
    for name, lines in corpus.sessions.items():
        ingest_bytes(
            workspace=workspace,
            name=f"{name}.jsonl",
            data=b"\n".join(lines) + b"\n",
            source="demo",
            refresh_analytics=False,
        )
    with run_on_commit():
        analytics_refresh_queue(workspace=workspace)
    return corpus


def _section(workspace):
    stored = result_for(workspace=workspace, filters=AnalyticsFilters())
    assert stored is not None
    assert "post_compaction" not in stored.result["failures"], stored.result["failures"]
    return stored.result["post_compaction"]


def _within(rate, truth):
    low, high = rate["ci"]
    return low <= truth <= high


def test_planted_corpus(workspace, planted, members, run_on_commit, api_for, client_for):
    """One ingest of the planted corpus (ingesting is the slow part), every check on it."""
    _rates_are_recovered(workspace, planted)
    _only_operator_messages_count(workspace, planted)
    _api(api_for)
    _new_phrase_version(workspace, planted, members, run_on_commit)
    _pages(workspace, client_for)


def _rates_are_recovered(workspace, planted):
    section = _section(workspace)
    assert section["compactions"] == 60
    assert section["phrase_list_version"] == 1
    for row in section["bins"]:
        lo, hi = row["steps"]
        steps = range(lo, hi + 1)
        hits, n = planted.counts(steps)
        assert (row["correction"]["count"], row["correction"]["n"]) == (hits, n)
        errors, results = planted.counts(steps, errors=True)
        assert (row["tool_error"]["count"], row["tool_error"]["n"]) == (errors, results)
        assert _within(row["tool_error"], TOOL_ERROR)
    for trigger, shape in (("auto", auto_shape), ("manual", manual_shape)):
        group = section["by_trigger"][trigger]
        assert group["flagged"] is (trigger == "manual")
        for row in group["bins"]:
            lo, hi = row["steps"]
            hits, n = planted.counts(range(lo, hi + 1), trigger=trigger)
            assert (row["correction"]["count"], row["correction"]["n"]) == (hits, n)
            assert _within(row["correction"], shape(lo)), (trigger, row)
        # the planted shape: 0.45 (0.60 manual) in steps 1–5 against 0.15
        ratio = group["ratio_first5_to_baseline"]
        truth = shape(1) / shape(BASELINE_STEPS[0])
        assert ratio["ci"][0] <= truth <= ratio["ci"][1]
        assert group["elevated_until_step"] == 20
        assert group["recovered_bin"] == [21, 30]
    assert section["elevated_until_step"] == 20
    first, base = (
        planted.counts(range(1, 6)),
        planted.counts(range(BASELINE_STEPS[0], BASELINE_STEPS[1] + 1)),
    )
    expected = (first[0] / first[1]) / (base[0] / base[1])
    assert section["ratio_first5_to_baseline"]["value"] == pytest.approx(expected)
    # the dissociation: tool errors flat, no elevation after the compaction
    tool = section["tool_error_ratio_first5_to_baseline"]
    assert tool["ci"][0] <= 1 <= tool["ci"][1]
    assert set(section["by_task_type"]) == {"building", "code_understanding"}
    for task_type, group in section["by_task_type"].items():
        hits, n = planted.counts(range(1, 6), task_type=task_type)
        assert (group["first5"]["correction"]["count"], group["first5"]["correction"]["n"]) == (
            hits,
            n,
        )


def _only_operator_messages_count(workspace, planted):
    section = _section(workspace)
    hits, n = planted.counts(range(1, 151))
    assert section["operator_messages"] == n
    assert section["matches_total"] == hits
    assert len(section["matches"]) == hits
    assert {m["phrase"] for m in section["matches"]} == {"that's wrong"}
    assert all("that's wrong" in m["excerpt"] for m in section["matches"])
    # local-command output at steps 3, 13, … (the manual compactions' /compact command is
    # followed by an operator message before the next call: the parser keeps the last one)
    assert section["excluded_messages"]["command"] == 60 * 15
    assert "meta" not in section["excluded_messages"]  # isMeta lines are never stored


def _new_phrase_version(workspace, planted, members, run_on_commit):
    with run_on_commit():
        correction_phrases_save(
            workspace=workspace, phrases=["keep the old signature"], actor=members["editor"]
        )
    section = _section(workspace)
    assert section["phrase_list_version"] == 2
    assert {m["phrase"] for m in section["matches"]} == {"keep the old signature"}
    assert section["matches_total"] == planted.counts(range(1, 151))[0]


def _api(api_for):
    body = api_for("viewer").get("/api/v1/analytics/post-compaction/").json()
    assert body["status"] == "ok"
    result = body["result"]
    assert [tuple(b["steps"]) for b in result["bins"]] == [tuple(e) for e in BIN_EDGES]
    first = result["bins"][0]
    assert set(first) == {"steps", "correction", "tool_error"}
    assert set(first["correction"]) == {"n", "count", "rate", "ci"}
    assert set(result["ratio_first5_to_baseline"]) >= {"value", "ci"}
    assert result["elevated_until_step"] == 20
    assert result["phrase_list_version"] == 1
    assert set(result["by_trigger"]) == {"auto", "manual"}
    assert result["by_trigger"]["manual"]["elevated_until_step"] == 20


def _pages(workspace, client_for):
    base = f"/w/{workspace.slug}/analytics/post-compaction/"
    page = client_for("viewer").get(base)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="post-compaction-chart"' in html
    assert "reverse causation possible" in html  # the manual row is flagged
    assert "keep the old signature" in html  # a counted message, with its phrase
    figure = page.context["pc_figure"]
    names = [trace.get("name") for trace in figure["data"]]
    assert "correction rate" in names and "tool-error rate" in names
    assert "correction rate: 95% Wilson band" in names
    exported = client_for("viewer").get(base + "corrections.csv")
    csv = b"".join(exported.streaming_content).decode().splitlines()
    assert csv[0].startswith("session,call_index,step,trigger")
    assert len(csv) == 1 + page.context["pc"]["matches_total"]


def test_phrase_list_versions(workspace, client_for, members, run_on_commit):
    url = f"/w/{workspace.slug}/analytics/post-compaction/phrases/"
    page = client_for("viewer").get(url)
    assert page.status_code == 200
    assert "version 1" in page.content.decode()
    assert client_for("viewer").post(url, {"phrases": "wrong"}).status_code == 403
    with run_on_commit():
        saved = client_for("editor").post(
            url, {"phrases": "Wrong\n\nundo that\nwrong", "note": "shorter"}
        )
    assert saved.status_code == 302
    row = CorrectionPhraseList.objects.get(workspace=workspace)
    assert (row.version, row.phrases, row.created_by) == (
        2,
        ["wrong", "undo that"],
        members["editor"],
    )
    event = AuditEvent.objects.get(workspace=workspace, action="correction_phrases.save")
    assert event.data["previous_version"] == 1
    assert event.data["added"] == ["undo that"]
    assert "no," in event.data["removed"]
    again = client_for("editor").post(url, {"phrases": "wrong\nundo that"})
    assert again.status_code == 400  # nothing changed: no new version
    assert CorrectionPhraseList.objects.filter(workspace=workspace).count() == 1
    assert "version 2" in client_for("viewer").get(url).content.decode()


def _codex_rollout(steps: int, corrected: set[int]) -> bytes:
    """A Codex rollout: three calls, a compaction, then `steps` calls, each prompted."""
    lines = []
    clock = [0]

    def add(kind, payload):
        clock[0] += 5
        stamp = f"2026-03-02T10:{clock[0] // 60 % 60:02d}:{clock[0] % 60:02d}.000Z"
        lines.append({"timestamp": stamp, "type": kind, "payload": payload})

    add("session_meta", {"id": "019c8a59-0000-7000-8000-000000000001", "timestamp": "2026-03-02T10:00:00.000Z", "cwd": "/w", "cli_version": "0.104.0"})  # fmt: skip
    add("turn_context", {"model": "gpt-5.3-codex", "cwd": "/w"})
    total = [0]

    def step(n, text, context):
        add("event_msg", {"type": "user_message", "message": text})
        add("response_item", {"type": "function_call", "name": "exec_command", "arguments": '{"cmd":["ls"]}', "call_id": f"call_{n}"})  # fmt: skip
        total[0] += context + 50
        usage = {"input_tokens": context, "cached_input_tokens": 0, "output_tokens": 50, "reasoning_output_tokens": 0, "total_tokens": context + 50}  # fmt: skip
        add("event_msg", {"type": "token_count", "info": {"total_token_usage": {**usage, "input_tokens": total[0], "total_tokens": total[0]}, "last_token_usage": usage, "model_context_window": 258400}})  # fmt: skip
        add("response_item", {"type": "function_call_output", "call_id": f"call_{n}", "output": "Error: no such file"})  # fmt: skip

    for n in range(3):
        step(n, "Look at the repository.", 20_000 + n * 10_000)
    add("compacted", {"message": "Summary: you were wrong about the parser."})
    add("event_msg", {"type": "context_compacted"})
    for s in range(1, steps + 1):
        step(100 + s, "No, that's wrong." if s in corrected else "Carry on.", 15_000 + s * 500)
    return b"\n".join(json.dumps(line).encode() for line in lines) + b"\n"


def test_codex_operator_messages_count_and_its_tool_results_do_not(workspace, run_on_commit):
    ingest_bytes(
        workspace=workspace,
        name="rollout-2026-03-02T10-00-00-019c8a59.jsonl",
        data=_codex_rollout(80, {1, 2, 3, 70}),
        source="demo",
        refresh_analytics=False,
    )
    with run_on_commit():
        analytics_refresh_queue(workspace=workspace)
    section = _section(workspace)
    assert section["compactions"] == 1
    assert set(section["by_trigger"]) == {"unknown"}
    assert section["by_trigger"]["unknown"]["flagged"] is True
    assert section["operator_messages"] == 80
    assert section["first5"]["correction"]["count"] == 3
    assert section["matches_total"] == 4
    assert [m["step"] for m in section["matches"]] == [1, 2, 3, 70]
    # Codex flags no tool result as an error: its results are not observed at all
    assert section["tool_results"] == 0
