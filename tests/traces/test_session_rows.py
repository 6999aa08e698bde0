"""A long session lists its first 50 runs and compactions, says how many there are, and shows
them all on request; the chart still marks every compaction."""

import json
import re

import pytest

from tests.annotations.conftest import ingest_synthetic
from traces.models import Compaction, Run
from traces.synthetic import CorpusParams

pytestmark = pytest.mark.django_db

LONG = CorpusParams(
    sessions=1, steps_per_session=(400, 400), threshold=30_000, post_compaction=16_000,
    start_context=(14_000, 15_000), subagents_per_session=(0, 0), seed=5,
)  # fmt: skip


def rows(page: str, section: str) -> int:
    """Body rows of the table under the heading with id `section`."""
    part = page.split(f'<h2 id="{section}">')[1].split("<h2")[0]
    return part.count("  <tr>\n")


def test_a_long_session_lists_fifty_runs_and_compactions_then_all_on_request(workspace, client_for):
    (session,) = ingest_synthetic(workspace, LONG, name="long")
    compactions = Compaction.objects.filter(session=session).count()
    runs = Run.objects.filter(session=session).count()
    assert compactions > 50 and runs > 50
    client = client_for("viewer")
    url = f"/w/{workspace.slug}/traces/sessions/{session.pk}/"
    page = client.get(url).content.decode()
    assert rows(page, "runs") == 50 and rows(page, "compactions") == 50
    assert f"Showing the first 50 of {runs:,} runs" in page
    assert f"Showing the first 50 of {compactions:,} compactions" in page
    figure = json.loads(
        re.search(
            r'<script id="context-timeline-data" type="application/json">(.*?)</script>', page, re.S
        ).group(1)
    )
    full = [c for c in Compaction.objects.filter(session=session) if c.kind == "full"]
    assert len(figure["layout"]["shapes"]) == len(full)  # the chart marks them all
    everything = client.get(url + "?all=compactions").content.decode()
    assert rows(everything, "compactions") == compactions and rows(everything, "runs") == 50
    assert "compactions-more" not in everything and "runs-more" in everything
    assert rows(client.get(url + "?all=runs").content.decode(), "runs") == runs
