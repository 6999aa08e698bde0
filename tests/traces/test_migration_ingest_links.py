"""Migration 0007 backfills what ingests before it did not record: which sessions each
file held, which job read each file, and when each session was last ingested."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("traces", "0006_ingested_file_growth"), ("governance", "0002_job_heartbeat")]
AFTER = [("traces", "0007_ingest_links")]


@pytest.fixture(autouse=True)
def latest_schema_after():
    """Leave every migration applied: the tests after this one need the later tables."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("latest_schema")
def test_backfill_links_files_jobs_and_stamps_sessions():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Workspace = old.get_model("governance", "Workspace")
    Job = old.get_model("governance", "Job")
    RawUpload = old.get_model("traces", "RawUpload")
    IngestedFile = old.get_model("traces", "IngestedFile")
    Session = old.get_model("traces", "Session")
    Agent = old.get_model("traces", "Agent")
    Call = old.get_model("traces", "Call")

    workspace = Workspace.objects.create(slug="w", name="W")
    job = Job.objects.create(workspace=workspace, kind="trace_ingest", status="succeeded")
    upload = RawUpload.objects.create(
        workspace=workspace, sha256="a" * 64, original_name="a.jsonl", size=1,
        file="raw/a", source="web", job=job,
    )  # fmt: skip
    read = IngestedFile.objects.create(
        workspace=workspace, upload=upload, member="a.jsonl", sha256="b" * 64
    )
    IngestedFile.objects.filter(pk=read.pk).update(created_at=datetime(2026, 5, 1, tzinfo=UTC))
    linked, _alone = (
        Session.objects.create(workspace=workspace, harness="claude-code", external_id=name)
        for name in ("linked", "alone")
    )
    Session.objects.update(created_at=datetime(2026, 4, 1, tzinfo=UTC))
    agent = Agent.objects.create(workspace=workspace, session=linked, external_id="main")
    for index in range(2):
        Call.objects.create(
            workspace=workspace, session=linked, agent=agent, key=f"k{index}",
            session_index=index, timestamp=datetime(2026, 3, 1, tzinfo=UTC),
            source_file_id=read.pk,
        )  # fmt: skip

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Session = new.get_model("traces", "Session")
    IngestedFile = new.get_model("traces", "IngestedFile")
    JobFile = new.get_model("traces", "JobFile")

    assert list(IngestedFile.objects.get(pk=read.pk).sessions.values_list("pk", flat=True)) == [
        linked.pk
    ]
    assert list(JobFile.objects.values_list("job_id", "file_id", "read")) == [
        (job.pk, read.pk, True)
    ]
    stamps = dict(Session.objects.values_list("external_id", "last_ingested_at"))
    assert stamps == {
        "linked": datetime(2026, 5, 1, tzinfo=UTC),  # its newest file, read after it began
        "alone": datetime(2026, 4, 1, tzinfo=UTC),  # no file: when it was first ingested
    }
