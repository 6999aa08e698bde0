"""Migration 0009 computes the text facts of calls stored before it."""

from datetime import UTC, datetime

import orjson
import pytest
import zstandard
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("traces", "0008_follow_offsets")]
AFTER = [("traces", "0009_call_text_facts")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("latest_schema")
def test_migration_fills_the_facts_of_stored_calls():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Workspace = old.get_model("governance", "Workspace")
    Session = old.get_model("traces", "Session")
    Agent = old.get_model("traces", "Agent")
    Call = old.get_model("traces", "Call")
    CallText = old.get_model("traces", "CallText")

    workspace = Workspace.objects.create(slug="w", name="W")
    session = Session.objects.create(workspace=workspace, harness="claude-code", external_id="s")
    agent = Agent.objects.create(workspace=workspace, session=session, external_id="main")
    texts = {
        "operator": {"prompt": "You forgot the tests.", "results": {
            "t1": {"content": "ok", "is_error": False}, "t2": {"content": "no", "is_error": True}}},
        "command": {"prompt": "<command-name>/clear</command-name>"},
        "none": {"blocks": [], "results": {"t3": {"content": "ok", "is_error": False}}},
    }  # fmt: skip
    compress = zstandard.ZstdCompressor().compress
    ids = {}
    for index, (name, text) in enumerate(texts.items()):
        call = Call.objects.create(
            workspace=workspace, session=session, agent=agent, key=name, session_index=index,
            timestamp=datetime(2026, 3, 1, tzinfo=UTC),
        )  # fmt: skip
        CallText.objects.create(call=call, data=compress(orjson.dumps(text)))
        ids[name] = call.pk

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Call = new.get_model("traces", "Call")
    OperatorPrompt = new.get_model("traces", "OperatorPrompt")
    facts = {
        key: (kind, results, errors)
        for key, kind, results, errors in Call.objects.values_list(
            "key", "prompt_kind", "tool_results", "tool_errors"
        )
    }
    assert facts == {
        "operator": ("operator", 2, 1),
        "command": ("command", 0, 0),
        "none": ("", 1, 0),
    }
    assert list(OperatorPrompt.objects.values_list("call_id", "text")) == [
        (ids["operator"], "You forgot the tests.")
    ]
