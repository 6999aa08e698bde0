import pytest

from traces.ingest import IngestSummary
from traces.services import ingest_paths


@pytest.fixture
def ingest(workspace):
    """Ingest paths into `workspace` through the CLI's service; returns the summary."""

    def run(*paths, fmt="auto", target=None) -> IngestSummary:
        return ingest_paths(workspace=target or workspace, paths=[str(p) for p in paths], fmt=fmt)

    return run


@pytest.fixture
def latest_schema():
    """For a test that migrates backwards: the schema is back at the latest migration after
    it, so that the tests after it find every column."""
    yield
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
