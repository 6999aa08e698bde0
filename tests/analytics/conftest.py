import pytest

from traces.services import ingest_bytes
from traces.synthetic import CorpusParams, generate_corpus


@pytest.fixture
def corpus(workspace, run_on_commit):
    """A small generated corpus with compactions, ingested, with analytics computed."""

    def make(sessions=6, target=None, **overrides):
        params = CorpusParams(
            sessions=sessions, seed=12, steps_per_session=(150, 260), threshold=150_000, **overrides
        )
        with run_on_commit():
            for generated in generate_corpus(params):
                ingest_bytes(
                    workspace=target or workspace,
                    name=f"{generated.session_id}.jsonl",
                    data=b"\n".join(generated.lines) + b"\n",
                    source="demo",
                )
        return params

    return make
