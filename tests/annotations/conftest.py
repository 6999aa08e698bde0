"""Fixtures: sessions ingested through the real pipeline (synthetic Claude Code transcripts and
crafted ones), and helpers to find their runs."""

from __future__ import annotations

import json

import pytest

from tests.traces.factories import claude_assistant, claude_boundary, claude_user
from traces.models import AgentKind, Call, Run, Session, UploadSource
from traces.services import ingest_bytes
from traces.synthetic import CorpusParams, generate_corpus


def ingest_synthetic(workspace, params: CorpusParams, name: str = "synthetic"):
    sessions = []
    for generated in generate_corpus(params):
        ingest_bytes(
            workspace=workspace,
            name=f"{name}-{generated.session_id}.jsonl",
            data=b"\n".join(generated.lines) + b"\n",
            source=UploadSource.DEMO,
        )
        sessions.append(Session.objects.get(workspace=workspace, external_id=generated.session_id))
    return sessions


@pytest.fixture
def small_session(workspace) -> Session:
    """One synthetic session: ~90 main steps, compactions, a subagent or two."""
    params = CorpusParams(
        sessions=1, steps_per_session=(90, 90), subagents_per_session=(1, 1), threshold=120_000,
        seed=11,
    )  # fmt: skip
    return ingest_synthetic(workspace, params)[0]


@pytest.fixture
def other_session(other_workspace) -> Session:
    params = CorpusParams(sessions=1, steps_per_session=(20, 20), seed=12)
    return ingest_synthetic(other_workspace, params, name="other")[0]


def main_run(session: Session, index: int = 0) -> Run:
    return Run.objects.get(session=session, agent__kind=AgentKind.MAIN, index=index)


def call_in(run: Run, offset: int = 0) -> Call:
    """The run's `offset`-th call (of its own agent)."""
    return Call.objects.filter(
        agent=run.agent,
        session_index__gte=run.first_call_index,
        session_index__lte=run.last_call_index,
    ).order_by("session_index")[offset]


HOSTILE = "<script>alert('pwned')</script>"


@pytest.fixture
def hostile_session(workspace) -> Session:
    """A transcript whose prompt, text, tool input and tool result all carry markup, plus a code
    fence, a compaction and a long tool result."""
    long_result = "\n".join(f"{i:4d} line {HOSTILE}" for i in range(400))
    lines = [
        claude_user(f"Fix the login bug {HOSTILE}", t=0, session="hostile"),
        claude_assistant(
            "m1", "r1", t=1, cr=10_000, cc=2_000, session="hostile",
            content=[
                {"type": "thinking", "thinking": f"Plan {HOSTILE}"},
                {"type": "text", "text": f"I will run this:\n```bash\necho {HOSTILE}\n```\nand <b>check</b>."},
                {"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {"command": f"grep '{HOSTILE}' -r ."}},
            ],
        ),
        claude_user([{"type": "tool_result", "tool_use_id": "toolu_a", "content": long_result}], t=2, session="hostile"),
        claude_assistant(
            "m2", "r2", t=3, cr=13_000, cc=1_500, session="hostile",
            content=[{"type": "tool_use", "id": "toolu_b", "name": "Read", "input": {"file_path": "/x.py"}}],
        ),
        claude_user([{"type": "tool_result", "tool_use_id": "toolu_b", "content": "ok", "is_error": True}], t=4, session="hostile"),
        claude_boundary(t=5, pre=14_600, session="hostile", uuid="cb-h"),
        claude_assistant("m3", "r3", t=6, cr=5_000, cc=500, session="hostile"),
        claude_assistant("m4", "r4", t=7, cr=5_600, cc=500, session="hostile"),
    ]  # fmt: skip
    ingest_bytes(
        workspace=workspace,
        name="hostile.jsonl",
        data=("\n".join(lines) + "\n").encode(),
        source=UploadSource.DEMO,
    )
    return Session.objects.get(workspace=workspace, external_id="hostile")


def mark_payload(session: Session, call_index: int, **extra) -> dict:
    payload = {
        "session": session.pk,
        "agent": None,
        "call_index": call_index,
        "failure_class": "forgotten_constraint",
        "note": "Dropped the rule about migrations.",
        "evidence_call_indexes": [],
        "confidence": "high",
    }
    payload.update(extra)
    return payload


def as_json(data) -> str:
    return json.dumps(data)


@pytest.fixture
def runs_that_go_wrong(workspace, members):
    """The demo's runs that go wrong and their queue, seeded by the demo module itself into the
    test workspace (reviewer-a and editor-a annotate). Returns the queue."""
    import io

    from traces.annotations.demo import seed_runs_that_go_wrong

    return seed_runs_that_go_wrong(workspace=workspace, users=members, stdout=io.StringIO())
