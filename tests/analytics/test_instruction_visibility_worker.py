"""Instruction visibility as a job, run by a real Celery worker (Redis broker): through the
API (POST, then the run's progress and result), and in Chromium (the page shows the job's
progress while it waits for a worker, then the counts once one has run it)."""

import os
import time

import pytest
from celery.contrib.testing.worker import start_worker

from governance.celery import app as celery_app
from tests.analytics.generated_instruction_visibility import (
    INSTRUCTION,
    as_tally,
    plan,
    reference,
    transcripts,
)
from traces.analytics.models import InstructionVisibilityRun
from traces.services import ingest_bytes

RUNS = "/api/v1/analytics/instruction-visibility/runs/"


def wait_for(predicate, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.3)
    return False


def _ingest(workspace, planned):
    for name, data in transcripts(planned).items():
        ingest_bytes(
            workspace=workspace,
            name=f"{name}.jsonl",
            data=data,
            source="demo",
            refresh_analytics=False,
        )


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_worker_counts_a_run_started_through_the_api(celery_worker, workspace, api_for):
    planned = plan(4)
    _ingest(workspace, planned)
    client = api_for("viewer")
    started = client.post(RUNS, {"instruction": INSTRUCTION}, format="json")
    assert started.status_code == 202, started.content
    body = started.json()
    assert body["result"] is None and body["job"]["kind"] == "instruction_visibility"
    url = f"{RUNS}{body['id']}/"
    assert wait_for(lambda: client.get(url).json()["job"]["status"] == "succeeded")
    done = client.get(url).json()
    calls = sum(len(c) for agents in planned.values() for c in agents.values())
    assert done["job"]["progress_done"] == done["job"]["progress_total"] == calls
    assert done["job"]["progress_unit"] == "calls" and done["job"]["attempts"] == 1
    expected = reference(planned)
    assert as_tally(done["result"]["overall"]) == expected["overall"]
    assert [as_tally(r) for r in done["result"]["by_turns"]] == expected["by_bin"]
    assert done["result"]["calls_read"] == calls


@pytest.mark.browser
@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_page_shows_progress_then_the_counts(page, login, members, workspace, monkeypatch):
    planned = plan(6)
    _ingest(workspace, planned)
    # The on-request limit, lowered to 10 calls, so that the page offers the job.
    from traces.analytics import instruction_visibility_selectors as selectors

    monkeypatch.setattr(
        selectors.instruction_visibility_for,
        "__kwdefaults__",
        {"max_calls": 10, "store": False, "progress": None},
    )
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/instruction-visibility/")
    page.get_by_label("Instruction (free text)").fill(INSTRUCTION)
    page.get_by_role("button", name="Count", exact=True).click()
    calls = sum(len(c) for agents in planned.values() for c in agents.values())
    too_many = page.locator("#iv-too-many").inner_text()
    assert f"These filters reach {calls} calls; at most 10 are counted while you wait" in too_many
    page.get_by_role("button", name="Count in the background").click()
    # No worker yet: the job waits in the queue and the page shows it.
    progress = page.locator("#iv-run-progress")
    assert "Counting in the background" in progress.inner_text()
    assert "Queued" in progress.inner_text() or "queued" in progress.inner_text()
    assert (
        "does not prove that the instruction had no influence"
        in page.locator("#iv-caveat").inner_text()
    )
    assert page.locator("#iv-result").count() == 0
    with start_worker(
        celery_app,
        pool="threads",
        concurrency=1,
        perform_ping_check=False,
        loglevel=os.environ.get("GOVERNANCE_WORKER_LOGLEVEL", "WARNING"),
        queues=["analysis"],
    ):
        page.locator("#iv-chart.js-plotly-plot").wait_for(timeout=90_000)
    run = InstructionVisibilityRun.objects.get(workspace=workspace)
    assert run.job.status == "succeeded"
    expected = reference(planned)["overall"]
    exact = page.locator("#iv-exact").inner_text()
    assert f"{expected['exact']} of n = {expected['n']}" in exact
    normalised = page.locator("#iv-normalised").inner_text()
    assert f"{expected['normalised']} of n = {expected['n']}" in normalised
    assert f"job #{run.job_id}" in page.locator("#iv-result").inner_text()
