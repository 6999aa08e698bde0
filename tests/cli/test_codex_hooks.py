"""Codex's lifecycle hooks (SessionStart, PreCompact, PostCompact; codex-rs/hooks):
`context-governance hook --codex …` fed Codex's hook input (its `*.command.input` schemas),
answering in Codex's output format, against the live test server; `install-hooks --codex`
writing them into $CODEX_HOME/hooks.json beside the notify line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import numfmt
from tests.cli.conftest import MODEL_ID
from tests.cli.test_policy import set_policy, weakest_ecl
from tests.specs.conftest import authoritative, make_spec  # noqa: F401 (fixtures)
from traces.models import Call, HookEvent, Session

pytestmark = pytest.mark.django_db(transaction=True)

THREAD = "019c8a59-0000-7000-8000-00000000c0de"
COMMAND = "/opt/cg/bin/context-governance"


@pytest.fixture
def env(live_server, editor_token, tmp_path):
    return {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
        "CODEX_HOME": str(tmp_path / "codex"),
    }


@pytest.fixture
def spec_v1(authoritative):  # noqa: F811
    return authoritative()


def rollout(path: Path, *, context: int, calls: int = 3) -> Path:
    """A Codex rollout whose last call held `context` input tokens (cached included)."""
    lines = [
        {"timestamp": "2026-12-03T10:00:00Z", "type": "session_meta",
         "payload": {"id": THREAD, "cwd": "/home/dev/payments", "cli_version": "0.130.0"}},
        {"timestamp": "2026-12-03T10:00:01Z", "type": "turn_context",
         "payload": {"model": MODEL_ID, "cwd": "/home/dev/payments"}},
    ]  # fmt: skip
    for n in range(calls):
        usage = {"input_tokens": context - 1000 * (calls - 1 - n), "cached_input_tokens": 1000,
                 "output_tokens": 50 + n, "reasoning_output_tokens": 0,
                 "total_tokens": context + 50}  # fmt: skip
        lines.append(
            {"timestamp": f"2026-12-03T10:00:{10 + n}Z", "type": "event_msg",
             "payload": {"type": "token_count",
                         "info": {"last_token_usage": usage, "total_token_usage": usage,
                                  "model_context_window": 200_000}}}
        )  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def codex_input(event: str, transcript: Path, **keys) -> dict:
    """The keys of Codex's `<event>.command.input` schema."""
    return {
        "session_id": THREAD, "turn_id": "turn-1", "transcript_path": str(transcript),
        "cwd": "/home/dev/payments", "hook_event_name": event, "model": MODEL_ID, **keys,
    }  # fmt: skip


def run_json(cli, name, payload, env) -> dict | None:
    result = cli("hook", "--codex", name, stdin=json.dumps(payload), env=env)
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    out = result.stdout.decode()
    return json.loads(out) if out else None


def test_block_is_continue_false_and_a_suggestion_a_system_message(
    cli, env, tmp_path, approved_limit, spec_v1, workspace, members
):
    ecl = weakest_ecl(approved_limit)
    path = rollout(tmp_path / f"rollout-2026-12-03T10-00-00-{THREAD}.jsonl", context=ecl + 5_000)
    set_policy(workspace, members, "block", context=True)
    auto = run_json(cli, "pre-compact", codex_input("PreCompact", path, trigger="auto"), env)
    assert set(auto) == {"continue", "stopReason", "systemMessage"}
    assert auto["continue"] is False
    assert f"holds {numfmt.tokens(ecl + 5_000)} tokens" in auto["stopReason"]
    assert auto["systemMessage"] == auto["stopReason"]
    manual = run_json(cli, "pre-compact", codex_input("PreCompact", path, trigger="manual"), env)
    assert set(manual) == {"systemMessage"}  # never blocked: a warning
    # The first hook sent the rollout's lines after its answer: the link now names the session.
    session = Session.objects.get(harness="codex", external_id=THREAD)
    assert manual["systemMessage"] == f"{auto['stopReason']}&session={session.pk}"
    set_policy(workspace, members, "suggest", context=True)
    suggest = run_json(cli, "pre-compact", codex_input("PreCompact", path, trigger="auto"), env)
    assert suggest == manual
    set_policy(workspace, members, "off", context=True)
    assert (
        run_json(cli, "pre-compact", codex_input("PreCompact", path, trigger="auto"), env) is None
    )
    start = run_json(cli, "session-start", codex_input(
        "SessionStart", path, source="startup", permission_mode="default"), env)  # fmt: skip
    assert set(start) == {"hookSpecificOutput"}
    assert start["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert (
        f"qualified effective context length {numfmt.tokens(ecl)}"
        in (start["hookSpecificOutput"]["additionalContext"])
    )
    assert (
        run_json(cli, "post-compact", codex_input("PostCompact", path, trigger="auto"), env) is None
    )
    events = HookEvent.objects.filter(harness="codex")
    assert events.count() == 6
    assert set(events.values_list("session_external_id", flat=True)) == {THREAD}
    assert {e.context_tokens for e in events.filter(event="PreCompact")} == {ecl + 5_000}
    # The rollout's lines went too, as a Codex session of that thread, each call once.
    assert Call.objects.filter(session=session).count() == 3
    assert HookEvent.objects.filter(harness="codex", session=session).count() >= 1


OTHER_HOOKS = {
    "hooks": {
        "PreCompact": [{"hooks": [{"type": "command", "command": "notify-send compacting"}]}],
        "Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "./stop.sh"}]}],
    }
}


@pytest.mark.parametrize("original", [None, json.dumps(OTHER_HOOKS)], ids=["no file", "other"])
def test_installer_adds_the_lifecycle_hooks_idempotently_and_uninstall_restores(cli, env, original):
    home = Path(env["CODEX_HOME"])
    hooks = home / "hooks.json"
    if original is not None:
        home.mkdir(parents=True)
        hooks.write_text(original)
    dry = cli("install-hooks", "--codex", "--command", COMMAND, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    diff = dry.stdout.decode()
    assert f'"command": "{COMMAND} hook --codex pre-compact"' in diff
    assert f'+notify = ["{COMMAND}", "codex-notify"]' in diff
    assert hooks.exists() == (original is not None)
    first = cli("install-hooks", "--codex", "--command", COMMAND, env=env)
    assert first.returncode == 0, first.stderr
    assert "trusted" in first.stderr.decode()
    data = json.loads(hooks.read_text())
    assert set(data) == {"hooks"}  # Codex's HooksFile: nothing else
    for event, name in (("SessionStart", "session-start"), ("PreCompact", "pre-compact"),
                        ("PostCompact", "post-compact")):  # fmt: skip
        ours = data["hooks"][event][-1]
        assert ours == {"hooks": [{"type": "command", "timeout": 5,
                                   "command": f"{COMMAND} hook --codex {name}"}]}  # fmt: skip
    if original is not None:
        assert data["hooks"]["PreCompact"][0] == OTHER_HOOKS["hooks"]["PreCompact"][0]
        assert data["hooks"]["Stop"] == OTHER_HOOKS["hooks"]["Stop"]
    installed = hooks.read_text()
    second = cli("install-hooks", "--codex", "--command", COMMAND, env=env)
    assert second.returncode == 0 and second.stdout.decode().count("nothing to change") == 2
    assert hooks.read_text() == installed
    removed = cli("uninstall-hooks", "--codex", env=env)
    assert removed.returncode == 0, removed.stderr
    if original is None:
        assert not hooks.exists() and not (home / "config.toml").exists()
    else:
        assert hooks.read_text() == original
