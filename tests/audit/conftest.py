"""Fixtures: synthetic sessions ingested through the real pipeline, and a built audit."""

from __future__ import annotations

import pytest

from tests.annotations.conftest import hostile_session, ingest_synthetic  # noqa: F401 (fixture)
from traces.audit import services
from traces.audit.analysis.sampling import strata_counts
from traces.synthetic import CorpusParams


@pytest.fixture
def corpus(workspace):
    params = CorpusParams(
        sessions=3, steps_per_session=(60, 90), subagents_per_session=(1, 1), threshold=120_000,
        seed=21,
    )  # fmt: skip
    return ingest_synthetic(workspace, params, name="audit")


@pytest.fixture
def all_strata(workspace, corpus):
    """Sizes asking two runs from every stratum the corpus has."""
    return dict.fromkeys(strata_counts(services.run_infos(workspace=workspace)), 2)


@pytest.fixture
def audit(workspace, members, all_strata, run_on_commit):
    with run_on_commit():
        created = services.audit_create(
            workspace=workspace, actor=members["reviewer"], name="First audit",
            strata_sizes=all_strata, seed=7,
        )  # fmt: skip
    created.refresh_from_db()
    return created
