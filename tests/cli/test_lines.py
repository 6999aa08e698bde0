"""The hooks send the transcript lines appended since the last send: subprocess runs of
`context-governance hook …` against the live test server, on a generated transcript that
grows between hooks. After every hook, the session's counts equal a reference counter
written here, independent of the parser."""

from __future__ import annotations

import base64
import hashlib
import json
import random
from dataclasses import dataclass, field

import pytest

from tests.cli.conftest import closed_port_url
from tests.traces.factories import claude_assistant, claude_boundary, claude_user
from traces.models import Agent, Call, Compaction, FollowedFile, HookEvent, Session
from traces.services import derive_pending_run

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "0f1e2d3c-aaaa-bbbb-cccc-00000000line"


@dataclass
class Reference:
    """What the lines written so far hold, counted from the generator's own records: calls
    grouped by (message id, request id or none); the main thread beats a sidechain, then the
    most output tokens, then the last line."""

    winners: dict = field(default_factory=dict)  # key -> (rank, usage, agent)
    compactions: int = 0

    def add(self, *, key, sidechain: bool, usage: dict, agent: str) -> None:
        rank = (not sidechain, usage["output_tokens"])
        best = self.winners.get(key)
        if best is None or rank >= best[0]:
            self.winners[key] = (rank, usage, agent)

    def counts(self) -> dict:
        usages = [usage for _, usage, _ in self.winners.values()]
        return {
            "calls": len(usages),
            "agents": len({agent for _, _, agent in self.winners.values()}),
            "compactions": self.compactions,
            "input_tokens": sum(u["input_tokens"] for u in usages),
            "cache_creation_tokens": sum(u["cache_creation_input_tokens"] for u in usages),
            "cache_read_tokens": sum(u["cache_read_input_tokens"] for u in usages),
            "output_tokens": sum(u["output_tokens"] for u in usages),
        }


class Transcript:
    """A Claude Code transcript written a few lines at a time: main-thread calls streamed over
    1–3 lines, subagent calls on sidechain lines, calls without a request id, tool results and
    a compaction boundary."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.ref = Reference()
        # Lines not written yet, each with what it adds to the reference once written whole.
        self.pending: list[tuple[str, dict | None]] = [
            (claude_user("Refactor the billing module", t=0, session=SESSION), None)
        ]
        self.n = 0

    def more(self, calls: int) -> None:
        for _ in range(calls):
            self._call()

    def _call(self) -> None:
        rng, i = self.rng, self.n
        self.n += 1
        sidechain = rng.random() < 0.3
        agent = rng.choice(["agent-a", "agent-b"]) if sidechain else "main"
        request = None if rng.random() < 0.2 else f"req_{i}"
        parts = rng.randint(1, 3)
        usage = {
            "input_tokens": rng.randint(1, 50),
            "cache_creation_input_tokens": rng.randint(0, 3_000),
            "cache_read_input_tokens": rng.randint(10_000, 150_000),
        }
        for part in range(parts):
            out = rng.randint(1, 3) if part < parts - 1 else rng.randint(20, 900)
            extra = {"agentId": agent} if sidechain else {}
            line = claude_assistant(
                f"msg_{i}", request, t=10 * i + part * 0.1 + 1, inp=usage["input_tokens"],
                cc=usage["cache_creation_input_tokens"], cr=usage["cache_read_input_tokens"],
                out=out, session=SESSION, sidechain=sidechain, uuid=f"u-{i}-{part}",
                model="claude-sonnet-4-20250514", **extra,
            )  # fmt: skip
            counted = {
                "key": (f"msg_{i}", request), "sidechain": sidechain,
                "usage": {**usage, "output_tokens": out}, "agent": agent,
            }  # fmt: skip
            self.pending.append((line, counted))
        if rng.random() < 0.5:
            line = claude_user(f"result {i}", t=10 * i + 5, session=SESSION, uuid=f"r-{i}")
            self.pending.append((line, None))

    def boundary(self) -> None:
        t = 10 * self.n + 7
        line = claude_boundary(t=t, pre=140_000, session=SESSION, uuid=f"cb-{self.n}")
        self.pending.append((line, {"compaction": True}))

    def flush(self, path, *, partial: bool = False) -> None:
        """Append the pending lines; with `partial`, the last one without its newline (and
        not yet counted), as a transcript being written looks."""
        whole = self.pending[:-1] if partial else self.pending
        text = "".join(line + "\n" for line, _ in whole)
        if partial:
            line, counted = self.pending[-1]
            text += line[: len(line) // 2]
            self.pending = [(line[len(line) // 2 :], counted)]
        else:
            self.pending = []
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
        for _, counted in whole:
            if counted and counted.get("compaction"):
                self.ref.compactions += 1
            elif counted:
                self.ref.add(**counted)


def counts_in_db() -> dict:
    """The session's totals (the derive step's), after checking them against its rows."""
    session = Session.objects.get(external_id=SESSION)
    calls = Call.objects.filter(session=session)
    assert sum(calls.values_list("output_tokens", flat=True)) == session.output_tokens
    assert (session.call_count, session.agent_count) == (
        Call.objects.filter(session=session).count(),
        Agent.objects.filter(session=session).count(),
    )
    return {
        "calls": session.call_count,
        "agents": session.agent_count,
        "compactions": Compaction.objects.filter(session=session).count(),
        "input_tokens": session.input_tokens,
        "cache_creation_tokens": session.cache_creation_tokens,
        "cache_read_tokens": session.cache_read_tokens,
        "output_tokens": session.output_tokens,
    }


def hook(cli, env, name, path, **keys):
    event = {"session-start": "SessionStart", "pre-compact": "PreCompact",
             "post-compact": "PostCompact"}[name]  # fmt: skip
    payload = {
        "session_id": SESSION, "transcript_path": str(path), "cwd": "/work/project",
        "hook_event_name": event, **keys,
    }  # fmt: skip
    result = cli("hook", name, stdin=json.dumps(payload), env=env)
    assert result.returncode == 0, result.stderr
    assert b"refused" not in result.stderr and b"not sent" not in result.stderr, result.stderr
    return result


@pytest.fixture
def env(live_server, editor_token):
    return {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
    }


def test_each_hook_sends_what_was_appended_and_counts_match(cli, env, tmp_path):
    path = tmp_path / "transcript.jsonl"
    transcript = Transcript(seed=19)
    transcript.more(12)
    transcript.flush(path, partial=True)  # the last line is cut mid-way
    hook(cli, env, "session-start", path, source="startup", model="claude-sonnet-4-20250514")
    # The unfinished last line is not sent: what it holds is counted once it is whole.
    assert counts_in_db() == transcript.ref.counts()
    state = json.loads((cli.cache_dir / "transcripts.json").read_text())
    ((stream,),) = [list(state.values())]
    size = path.stat().st_size
    assert stream["offset"] == path.read_bytes().rfind(b"\n") + 1 < size
    transcript.more(9)  # the rest of the cut line comes first
    transcript.boundary()
    transcript.flush(path)
    hook(cli, env, "pre-compact", path, trigger="auto", custom_instructions="")
    assert counts_in_db() == transcript.ref.counts()
    transcript.more(7)
    transcript.flush(path)
    hook(cli, env, "post-compact", path, trigger="auto", compact_summary="Kept: billing v2.")
    assert counts_in_db() == transcript.ref.counts()
    # The summary found the compaction the lines brought in just before the event.
    assert Compaction.objects.get().compact_summary == "Kept: billing v2."
    assert HookEvent.objects.get(event="PostCompact").session.external_id == SESSION
    # Nothing new: a hook sends nothing and adds nothing.
    before = FollowedFile.objects.get().lines
    hook(cli, env, "session-start", path, source="compact")
    assert counts_in_db() == transcript.ref.counts()
    assert FollowedFile.objects.get().lines == before
    assert FollowedFile.objects.get().offset == path.stat().st_size


def test_a_streamed_call_split_between_two_sends_is_one_call(cli, env, tmp_path):
    path = tmp_path / "t.jsonl"
    first = claude_assistant("m1", "r1", out=2, session=SESSION, uuid="a")
    last = claude_assistant("m1", "r1", out=321, session=SESSION, uuid="b")
    path.write_text(claude_user("go", session=SESSION) + "\n" + first + "\n")
    hook(cli, env, "session-start", path, source="startup")
    assert list(Call.objects.values_list("output_tokens", flat=True)) == [2]
    with open(path, "a") as handle:
        handle.write(last + "\n")
    hook(cli, env, "pre-compact", path, trigger="manual", custom_instructions="")
    assert list(Call.objects.values_list("output_tokens", flat=True)) == [321]
    assert Session.objects.get().output_tokens == 321


def test_a_truncated_and_rewritten_transcript_is_sent_again_and_counts_nothing_twice(
    cli, env, tmp_path
):
    path = tmp_path / "t.jsonl"
    transcript = Transcript(seed=7)
    transcript.more(15)
    transcript.flush(path)
    hook(cli, env, "session-start", path, source="startup")
    assert counts_in_db() == transcript.ref.counts()
    # Rewritten shorter with different first bytes, then new calls appended.
    rewritten = Transcript(seed=8)
    rewritten.ref = transcript.ref  # the calls already stored stay stored
    rewritten.n = 100
    rewritten.more(5)
    path.unlink()
    rewritten.flush(path)
    hook(cli, env, "pre-compact", path, trigger="auto", custom_instructions="")
    assert counts_in_db() == rewritten.ref.counts()
    row = FollowedFile.objects.get()
    assert (row.offset, row.resets) == (path.stat().st_size, 1)


def test_lost_client_state_goes_on_from_the_server_offset(cli, env, tmp_path):
    path = tmp_path / "t.jsonl"
    transcript = Transcript(seed=3)
    transcript.more(400)  # well over 64 KiB: the fingerprint is a full head
    transcript.flush(path)
    hook(cli, env, "session-start", path, source="startup")
    assert FollowedFile.objects.get().offset == path.stat().st_size
    (cli.cache_dir / "transcripts.json").unlink()
    transcript.more(3)
    transcript.flush(path)
    hook(cli, env, "pre-compact", path, trigger="auto", custom_instructions="")
    assert counts_in_db() == transcript.ref.counts()
    row = FollowedFile.objects.get()
    assert (row.offset, row.resets) == (path.stat().st_size, 0)  # went on, did not start over


def test_a_large_backlog_goes_in_chunks_within_the_budget_and_the_rest_later(cli, env, tmp_path):
    path = tmp_path / "t.jsonl"
    transcript = Transcript(seed=5)
    transcript.more(1200)  # about 1.5 MB: over twenty chunks of 64 KiB
    transcript.flush(path)
    size = path.stat().st_size
    assert size > 20 * 64 * 1024
    # A budget too short for the whole backlog: some chunks now, the rest with later hooks.
    short = {**env, "CONTEXT_GOVERNANCE_LINES_TIMEOUT": "0.5"}
    offsets = []
    for _ in range(80):
        hook(cli, short, "session-start", path, source="resume")
        offsets.append(FollowedFile.objects.get().offset)
        if offsets[-1] == size:
            break
    assert offsets[-1] == size and len(offsets) > 1, offsets
    assert offsets == sorted(offsets)
    # A send cut by the budget may still be running on the server when the next one
    # arrives: the debounced derive step then finds the session marked (as OTLP's are), and
    # the sweep or the next derive picks it up. Run it as the worker would.
    derive_pending_run(workspace_id=Session.objects.get().workspace_id)
    assert counts_in_db() == transcript.ref.counts()


def test_with_the_server_down_nothing_advances_and_the_next_hook_sends_it(cli, env, tmp_path):
    path = tmp_path / "t.jsonl"
    transcript = Transcript(seed=11)
    transcript.more(6)
    transcript.flush(path)
    down = {**env, "CONTEXT_GOVERNANCE_URL": closed_port_url()}
    payload = {"session_id": SESSION, "transcript_path": str(path), "trigger": "auto",
               "hook_event_name": "PostCompact", "compact_summary": "s"}  # fmt: skip
    result = cli("hook", "post-compact", stdin=json.dumps(payload), env=down)
    assert result.returncode == 0 and b"not sent" in result.stderr
    assert not (cli.cache_dir / "transcripts.json").exists()
    assert not FollowedFile.objects.exists()
    hook(cli, env, "session-start", path, source="resume")
    assert counts_in_db() == transcript.ref.counts()
    assert HookEvent.objects.count() == 2  # the spooled PostCompact went too


def test_the_lines_endpoint_needs_an_editor_and_answers_a_conflict_with_its_offset(
    api_for, workspace
):
    data = (claude_user("hi", session="s-api") + "\n").encode()
    head = hashlib.sha256(data).hexdigest()
    body = {"path": "/x/t.jsonl", "offset": 0, "data": base64.b64encode(data).decode(),
            "head_size": len(data), "head_sha256": head}  # fmt: skip
    assert api_for("viewer").post("/api/v1/hooks/lines/", body, format="json").status_code == 403
    editor = api_for("editor")
    answer = editor.post("/api/v1/hooks/lines/", body, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["offset"] == len(data) and answer.json()["lines"] == 1
    later = {**body, "offset": 5}
    conflict = editor.post("/api/v1/hooks/lines/", later, format="json")
    assert conflict.status_code == 409
    assert conflict.json()["offset"] == len(data) and conflict.json()["head_sha256"] == head
    unfinished = {**body, "data": base64.b64encode(b'{"type":').decode()}
    bad = editor.post("/api/v1/hooks/lines/", unfinished, format="json")
    assert bad.status_code == 400 and "newline" in json.dumps(bad.json())
    assert (
        editor.post("/api/v1/hooks/lines/", {**body, "data": "@@"}, format="json").status_code
        == 400
    )


def test_a_file_cut_back_to_its_first_lines_is_read_again_though_it_begins_the_same(
    cli, env, tmp_path
):
    path = tmp_path / "t.jsonl"
    transcript = Transcript(seed=13)
    transcript.more(400)  # well over 64 KiB: the cut keeps the whole fingerprinted head
    transcript.flush(path)
    hook(cli, env, "session-start", path, source="startup")
    data = path.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    path.write_bytes(data[:cut])  # the same first bytes, shorter than what was sent
    transcript.more(4)
    transcript.flush(path)
    hook(cli, env, "pre-compact", path, trigger="auto", custom_instructions="")
    row = FollowedFile.objects.get()
    assert (row.offset, row.resets) == (path.stat().st_size, 1)
    # Every call stays counted once: those cut off were stored, the new ones are added.
    assert counts_in_db() == transcript.ref.counts()
