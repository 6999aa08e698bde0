"""`context-governance hook …` as Claude Code runs it: a subprocess fed the hook's stdin,
against the live test server; spooled and resent when the server is down."""

from __future__ import annotations

import json

import pytest

from governance.services import api_token_revoke
from tests.cli.conftest import MODEL_ID, closed_port_url, write_transcript
from traces.models import HookEvent

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "0f1e2d3c-aaaa-bbbb-cccc-000000000002"


def hook_payload(event: str, transcript, **keys) -> dict:
    """The common hook keys (HARNESS_TELEMETRY.md §2) and the event's own."""
    return {
        "session_id": SESSION,
        "prompt_id": "p-1",
        "transcript_path": str(transcript),
        "cwd": "/home/dev/billing",
        "hook_event_name": event,
        **keys,
    }


@pytest.fixture
def env(live_server, editor_token):
    return {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
    }


def test_three_hooks_are_recorded_with_the_session(cli, env, tmp_path):
    transcript = write_transcript(tmp_path / "t.jsonl", context=151_234)
    runs = [
        ("session-start", hook_payload("SessionStart", transcript, source="startup",
                                       model=MODEL_ID, agent_type="", session_title="")),
        ("pre-compact", hook_payload("PreCompact", transcript, trigger="auto",
                                     custom_instructions="")),
        ("post-compact", hook_payload("PostCompact", transcript, trigger="auto",
                                      compact_summary="Settled: keep API v2; budget 96k.")),
    ]  # fmt: skip
    for name, payload in runs:
        result = cli("hook", name, stdin=json.dumps(payload), env=env)
        assert result.returncode == 0 and result.stderr == b"", result.stderr
        assert result.stdout == b""  # SessionStart's stdout would become context
    events = {e.event: e for e in HookEvent.objects.all()}
    assert set(events) == {"SessionStart", "PreCompact", "PostCompact"}
    assert events["PreCompact"].context_tokens == 151_234
    assert events["PreCompact"].trigger == "auto"
    assert events["SessionStart"].trigger == "startup"
    assert events["PostCompact"].payload["compact_summary"] == "Settled: keep API v2; budget 96k."
    assert {e.session_external_id for e in events.values()} == {SESSION}
    assert not (cli.cache_dir / "hook-spool.jsonl").exists()


def test_server_down_spools_and_the_next_hook_sends_both(cli, env, tmp_path):
    transcript = write_transcript(tmp_path / "t.jsonl", context=80_000)
    down = {**env, "CONTEXT_GOVERNANCE_URL": closed_port_url()}
    first = hook_payload("PreCompact", transcript, trigger="manual", custom_instructions="keep")
    result = cli("hook", "pre-compact", stdin=json.dumps(first), env=down)
    assert result.returncode == 0 and result.stdout == b""
    assert "not sent" in result.stderr.decode()
    (spooled,) = (cli.cache_dir / "hook-spool.jsonl").read_text().splitlines()
    assert json.loads(spooled)["payload"] == first
    assert not HookEvent.objects.exists()
    second = hook_payload("PostCompact", transcript, trigger="manual", compact_summary="s")
    assert cli("hook", "post-compact", stdin=json.dumps(second), env=env).returncode == 0
    assert sorted(HookEvent.objects.values_list("event", "context_tokens")) == [
        ("PostCompact", None),
        ("PreCompact", 80_000),
    ]
    assert not (cli.cache_dir / "hook-spool.jsonl").exists()
    # Sent once: the spool was emptied, so a third hook adds only itself.
    assert cli("hook", "post-compact", stdin=json.dumps(second), env=env).returncode == 0
    assert HookEvent.objects.count() == 3


def test_revoked_token_spools_and_exits_0(cli, env, editor_token, tmp_path):
    api_token_revoke(token=editor_token.token, actor=None)
    payload = hook_payload("SessionStart", tmp_path / "none.jsonl", source="compact")
    result = cli("hook", "session-start", stdin=json.dumps(payload), env=env)
    assert result.returncode == 0 and result.stdout == b""
    assert "This token was revoked on" in result.stderr.decode()
    assert (cli.cache_dir / "hook-spool.jsonl").exists()
    assert not HookEvent.objects.exists()


@pytest.mark.parametrize("stdin", [b"", b"{truncated", b'"a string"'])
def test_malformed_hook_input_exits_0_and_sends_nothing(cli, env, stdin):
    result = cli("hook", "pre-compact", stdin=stdin, env=env)
    assert result.returncode == 0 and result.stdout == b""
    assert "not a JSON object" in result.stderr.decode()
    assert not HookEvent.objects.exists()
    assert not (cli.cache_dir / "hook-spool.jsonl").exists()


def test_a_large_spool_drains_a_batch_at_a_time(cli, env, tmp_path):
    spool = cli.cache_dir / "hook-spool.jsonl"
    spool.parent.mkdir(parents=True)
    backlog = [
        {
            "event_id": f"old-{index}",
            "event": "PostCompact",
            "harness": "claude-code",
            "occurred_at": "2026-12-03T09:00:00+00:00",
            "payload": {"session_id": SESSION, "compact_summary": "s" * 50_000},
        }
        for index in range(12)
    ]
    spool.write_text("".join(json.dumps(event) + "\n" for event in backlog))
    payload = hook_payload("SessionStart", tmp_path / "none.jsonl", source="resume")
    assert cli("hook", "session-start", stdin=json.dumps(payload), env=env).returncode == 0
    # 256 KB holds five 50 KB events; the other seven wait for the next hook, in order.
    sent = set(HookEvent.objects.values_list("event_id", flat=True))
    assert {f"old-{index}" for index in range(5)} < sent and len(sent) == 6
    left = [json.loads(line)["event_id"] for line in spool.read_text().splitlines()]
    assert left == [f"old-{index}" for index in range(5, 12)]
    assert cli("hook", "session-start", stdin=json.dumps(payload), env=env).returncode == 0
    assert HookEvent.objects.count() == 12
