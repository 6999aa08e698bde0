"""Sessions with known token counts, to price by hand in the tests."""

import pytest

from tests.traces.factories import claude_assistant
from traces.models import Session
from traces.services import ingest_bytes

# (message id, model, input, cache write, cache read, output) of each call
CALLS = (
    ("m1", "claude-sonnet-4-5-20250929", 1200, 3000, 40_000, 800),
    ("m2", "claude-sonnet-4-5-20250929", 300, 500, 44_000, 1500),
    ("m3", "claude-haiku-4-5-20251001", 50, 0, 9000, 200),
)


def ingest_calls(workspace, calls=CALLS, *, session="sess-price", analytics=False) -> Session:
    lines = [
        claude_assistant(
            msg,
            f"req-{msg}",
            t=i * 10,
            model=model,
            inp=inp,
            cc=cc,
            cr=cr,
            out=out,
            session=session,
        )
        for i, (msg, model, inp, cc, cr, out) in enumerate(calls)
    ]
    ingest_bytes(
        workspace=workspace,
        name=f"{session}.jsonl",
        data=("\n".join(lines) + "\n").encode(),
        source="demo",
        refresh_analytics=analytics,
    )
    return Session.objects.get(workspace=workspace, external_id=session)


@pytest.fixture
def priced_session(workspace, run_on_commit):
    with run_on_commit():
        return ingest_calls(workspace)
