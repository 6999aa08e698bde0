"""The demo's runs that go wrong, through the real ingestion path: each keeps its evidence in
the stored text, its counts equal those computed from its transcript lines, its queue holds
the run with the first divergence, and nothing stored tells an annotator where that is."""

import io
from collections import defaultdict
from itertools import pairwise

import orjson
import pytest

from traces.annotations.demo import READ_QUEUE_NAME, run_holding_divergence, seed_runs_that_go_wrong
from traces.annotations.demo_runs import demo_runs
from traces.annotations.models import AnnotationQueue, Divergence, QueueItem
from traces.ingest.writes import decompress_text
from traces.models import Call, CallText, Compaction, Run, Session

pytestmark = pytest.mark.django_db

RUNS = {run.key: run for run in demo_runs()}


def texts(workspace, key) -> dict[int, dict]:
    """Stored text of every call of a demo session, by session index."""
    session = Session.objects.get(workspace=workspace, external_id=RUNS[key].session_id)
    calls = dict(Call.objects.filter(session=session).values_list("pk", "session_index"))
    return {
        calls[pk]: decompress_text(data)
        for pk, data in CallText.objects.filter(call_id__in=calls).values_list("call_id", "data")
    }


def tool(text: dict) -> dict:
    return next(b for b in text["blocks"] if b["type"] == "tool_use")


def result(text: dict) -> str:
    return next(iter(text["results"].values()))["content"]


def said(text: dict) -> str:
    return " ".join(b["text"] for b in text["blocks"] if b["type"] == "text")


def test_forgotten_constraint_evidence_is_in_the_stored_steps(workspace, runs_that_go_wrong):
    steps = texts(workspace, "forgotten_constraint")
    at = RUNS["forgotten_constraint"].expected_call
    assert "never touch the payments schema" in steps[0]["prompt"]
    after = min(i for i, t in steps.items() if "summary" in t)
    summary = steps[after]["summary"]
    assert summary.startswith("This session is being continued from a previous conversation")
    assert "Constraints from the user" in summary and "payments schema" not in summary
    assert "db/payments" not in summary
    assert after < at
    edit = tool(steps[at])
    assert edit["name"] == "Write" and edit["input"]["file_path"].endswith(
        "db/payments/migrations/0047_refund_reason.sql"
    )
    assert "ALTER TABLE payments.refunds" in edit["input"]["content"]
    # Nothing before it touched db/payments (reading is allowed); the operator corrects after.
    for index in range(at):
        if steps[index]["blocks"] and any(b["type"] == "tool_use" for b in steps[index]["blocks"]):
            used = tool(steps[index])
            assert (
                used["name"] == "Read" or "db/payments" not in orjson.dumps(used["input"]).decode()
            )
    corrected = [
        i
        for i, t in steps.items()
        if "Stop. The payments schema is off limits" in t.get("prompt", "")
    ]
    assert corrected and corrected[0] > at
    compaction = Compaction.objects.get(
        session__external_id=RUNS["forgotten_constraint"].session_id
    )
    assert compaction.after_call_index == after and compaction.trigger == "manual"
    assert compaction.pre_tokens > compaction.post_tokens


def test_repetition_evidence_is_in_the_stored_steps(workspace, runs_that_go_wrong):
    steps = texts(workspace, "repetition")
    at = RUNS["repetition"].expected_call
    first = tool(steps[0])
    assert "AssertionError" in result(steps[0])
    loop = [at, at + 1, at + 2, at + 3]
    for index in loop:
        assert tool(steps[index])["input"] == first["input"]  # the same call …
        assert "assert datetime.date(2026, 3, 3) == datetime.date(2026, 3, 2)" in result(
            steps[index]
        )
        assert steps[index]["results"][tool(steps[index])["id"]]["is_error"]  # … the same failure
    assert all(tool(steps[i])["name"] != "Edit" for i in range(at))  # nothing changed between
    assert "same test five times" in steps[at + 4]["prompt"]


def test_stale_evidence_is_in_the_stored_steps(workspace, runs_that_go_wrong):
    steps = texts(workspace, "stale_or_conflicting_evidence")
    at = RUNS["stale_or_conflicting_evidence"].expected_call
    assert "def compute_tax(amount: Decimal, region: str)" in result(steps[0])
    pulled = result(steps[at - 1])
    assert (
        "src/billing/tax.py" in pulled and "compute_tax(amount, region) becomes tax_for" in pulled
    )
    assert "from billing.tax import compute_tax" in tool(steps[at])["input"]["new_string"]
    failures = [result(steps[i]) for i in range(at + 1, at + 4)]
    assert any("cannot import name 'compute_tax'" in r for r in failures)
    assert any("String to replace not found in file" in r for r in failures)


def test_harness_truncation_evidence_is_in_the_stored_steps(workspace, runs_that_go_wrong):
    steps = texts(workspace, "harness_truncation")
    at = RUNS["harness_truncation"].expected_call
    suite = result(steps[at - 1])
    assert suite.rstrip().endswith("[… output truncated …]") and "passed" not in suite
    assert "gh pr create" in tool(steps[at])["input"]["command"]
    assert "cut off by the harness" in said(steps[at])
    assert "3 failures" in steps[at + 1]["prompt"]


def expected_counts(lines: list[bytes]) -> dict:
    """Counts straight from the transcript lines: one call per (message id, request id), its
    usage from the line with the highest output; compactions from boundary records."""
    calls: dict[tuple, dict] = {}
    compactions = 0
    for raw in lines:
        line = orjson.loads(raw)
        if line.get("subtype") == "compact_boundary":
            compactions += 1
        if line.get("type") != "assistant":
            continue
        key = (line["message"]["id"], line["requestId"])
        usage = line["message"]["usage"]
        if key not in calls or usage["output_tokens"] >= calls[key]["output_tokens"]:
            calls[key] = usage
    totals = defaultdict(int)
    for usage in calls.values():
        for name in (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        ):
            totals[name] += usage[name]
    contexts = [
        u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        for u in calls.values()
    ]
    return {"calls": len(calls), "compactions": compactions, "contexts": contexts, **totals}


@pytest.mark.parametrize("key", sorted(RUNS))
def test_ingested_counts_equal_counts_from_the_lines(workspace, runs_that_go_wrong, key):
    demo = RUNS[key]
    expected = expected_counts(demo.lines)
    assert expected["calls"] == demo.calls and expected["compactions"] == demo.compactions
    session = Session.objects.get(workspace=workspace, external_id=demo.session_id)
    assert session.call_count == expected["calls"]
    assert session.compaction_count == expected["compactions"]
    assert session.input_tokens == expected["input_tokens"]
    assert session.cache_creation_tokens == expected["cache_creation_input_tokens"]
    assert session.cache_read_tokens == expected["cache_read_input_tokens"]
    assert session.output_tokens == expected["output_tokens"]
    stored = list(
        Call.objects.filter(session=session)
        .order_by("session_index")
        .values_list("context_tokens", flat=True)
    )
    assert stored == expected["contexts"]
    assert session.max_context == max(expected["contexts"])
    # Usage grows with what the window holds, and drops only at the compaction.
    drops = sum(1 for a, b in pairwise(stored) if b < a)
    assert drops == demo.compactions
    assert Run.objects.filter(session=session, agent__kind="main").count() == demo.compactions + 1
    assert session.title == demo.title


def test_queue_holds_each_divergence_run_and_seeding_twice_adds_nothing(
    workspace, members, runs_that_go_wrong
):
    queue = runs_that_go_wrong
    assert queue.name == READ_QUEUE_NAME and queue.annotators_per_run == 2
    queued = set(QueueItem.objects.filter(queue=queue).values_list("run_id", flat=True))
    assert queued == {run_holding_divergence(workspace, demo).pk for demo in RUNS.values()}
    for demo in RUNS.values():
        run = run_holding_divergence(workspace, demo)
        assert run.first_call_index <= demo.expected_call <= run.last_call_index
    constraint_run = run_holding_divergence(workspace, RUNS["forgotten_constraint"])
    assert constraint_run.index == 1  # after the compaction
    calls, queues = Call.objects.count(), AnnotationQueue.objects.count()
    output = io.StringIO()
    again = seed_runs_that_go_wrong(workspace=workspace, users=members, stdout=output)
    assert again.pk == queue.pk and (Call.objects.count(), AnnotationQueue.objects.count()) == (
        calls,
        queues,
    )
    assert "(0 new calls)" in output.getvalue()


def test_nothing_stored_gives_the_answer_away(workspace, runs_that_go_wrong):
    """Blind marking: no mark on the demo runs, and no title, queue name or filter names the
    failure class."""
    assert not Divergence.objects.filter(workspace=workspace).exists()
    words = ["forgotten", "constraint", "repetition", "stale", "truncation", "diverge"]
    visible = [
        runs_that_go_wrong.name.replace("divergence", ""),
        orjson.dumps(runs_that_go_wrong.criteria).decode(),
    ]
    visible += list(Session.objects.filter(workspace=workspace).values_list("title", flat=True))
    for text in visible:
        assert not any(word in text.lower() for word in words), text
