"""0005 forgets analytics stored for a model filter (computed with the old substring match)
and keeps the others."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE, AFTER = (
    ("analytics", "0004_instruction_visibility_runs"),
    ("analytics", "0005_forget_results_by_model_part"),
)


def test_results_for_a_model_are_forgotten_the_others_kept(workspace):
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps
    Result = old.get_model("analytics", "AnalyticsResult")
    for key, filters in [("a", {}), ("b", {"model": ""}), ("c", {"model": "sonnet"}),
                         ("d", {"model": "claude-sonnet-4", "task_type": "qa"})]:  # fmt: skip
        Result.objects.create(
            workspace_id=workspace.pk, filter_key=key, filters=filters, data_version=1
        )
    executor = MigrationExecutor(connection)
    executor.migrate([AFTER])
    new = executor.loader.project_state([AFTER]).apps
    kept = new.get_model("analytics", "AnalyticsResult").objects.values_list(
        "filter_key", flat=True
    )
    assert sorted(kept) == ["a", "b"]
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
