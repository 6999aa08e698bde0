import pytest

from traces.ingest import IngestSummary
from traces.services import ingest_paths


@pytest.fixture
def ingest(workspace):
    """Ingest paths into `workspace` through the CLI's service; returns the summary."""

    def run(*paths, fmt="auto", target=None) -> IngestSummary:
        return ingest_paths(workspace=target or workspace, paths=[str(p) for p in paths], fmt=fmt)

    return run
