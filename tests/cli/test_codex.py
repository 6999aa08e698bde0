"""Codex: `context-governance codex-notify '<json>'` as Codex runs its `notify` program (the
JSON as the last argument), against the live test server; `install-hooks --codex` on
temporary config.toml files."""

from __future__ import annotations

import json
import shutil
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.cli.conftest import closed_port_url
from tests.conftest import SHARED_FIXTURES
from traces.models import Harness, HookEvent, Session

pytestmark = pytest.mark.django_db(transaction=True)

ROLLOUTS = sorted(SHARED_FIXTURES.glob("*rollout-*.jsonl"))
THREAD = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"


def notification(thread=THREAD, **overrides) -> dict:
    """Codex's notify JSON (codex-rs/hooks/src/legacy_notify.rs, its test's wire shape)."""
    return {
        "type": "agent-turn-complete",
        "thread-id": thread,
        "turn-id": "12345",
        "cwd": "/Users/example/project",
        "client": "codex-tui",
        "input-messages": ["Rename `foo` to `bar` and update the callsites."],
        "last-assistant-message": "Rename complete and verified `cargo build` succeeds.",
        **overrides,
    }


def reference_last_call(path: Path) -> tuple[int | None, str]:
    """Independent of the command: read the whole rollout forwards. The context is the last
    real call's `last_token_usage.input_tokens`, forgotten at a compaction; the model is the
    last `turn_context`'s."""
    context, model = None, ""
    for line in path.read_text().splitlines():
        record = json.loads(line)
        payload = record.get("payload") or {}
        if record["type"] == "turn_context" and payload.get("model"):
            model = payload["model"]
        if record["type"] == "compacted" or payload.get("type") == "context_compacted":
            context = None
        if payload.get("type") == "token_count" and payload.get("info"):
            tokens = payload["info"]["last_token_usage"]["input_tokens"]
            if tokens > 0:
                context = tokens
    return context, model


def place_rollout(codex_home: Path, source: Path, thread: str) -> Path:
    day = datetime.now(UTC)
    folder = codex_home / "sessions" / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"rollout-{day:%Y-%m-%dT%H-%M-%S}-{thread}.jsonl"
    shutil.copyfile(source, target)
    return target


@pytest.fixture
def env(live_server, editor_token, tmp_path):
    return {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
        "CODEX_HOME": str(tmp_path / "codex"),
    }


@pytest.mark.skipif(not ROLLOUTS, reason="the shared Codex rollout fixtures are not here")
def test_each_turn_is_recorded_with_the_context_of_its_last_call(cli, env, tmp_path, workspace):
    codex_home = Path(env["CODEX_HOME"])
    session = Session.objects.create(workspace=workspace, harness=Harness.CODEX, external_id=THREAD)
    expected = {}
    for index, source in enumerate(ROLLOUTS):
        thread = THREAD if index == 0 else f"019c0000-0000-7000-8000-{index:012d}"
        place_rollout(codex_home, source, thread)
        expected[thread] = reference_last_call(source)
        result = cli("codex-notify", json.dumps(notification(thread)), env=env)
        assert result.returncode == 0 and result.stdout == b"", result.stderr
        assert result.stderr == b""
    assert any(context for context, _ in expected.values())
    events = {e.session_external_id: e for e in HookEvent.objects.all()}
    assert set(events) == set(expected)
    for thread, (context, model) in expected.items():
        event = events[thread]
        assert (event.harness, event.event) == ("codex", "agent-turn-complete")
        assert event.context_tokens == context, thread
        assert event.payload["turn-id"] == "12345" and event.payload["session_id"] == thread
        # The prompt and the reply stay on the machine; only their lengths are sent.
        assert "input-messages" not in event.payload
        assert "last-assistant-message" not in event.payload
        assert event.payload["input-messages-chars"] == 47
        assert event.payload["last-assistant-message-chars"] == 52
        assert model  # every fixture names its model
    assert events[THREAD].session == session
    assert all(e.session is None for t, e in events.items() if t != THREAD)


def test_a_compaction_after_the_last_call_leaves_the_context_unknown(cli, env, tmp_path):
    codex_home = Path(env["CODEX_HOME"])
    usage = {"input_tokens": 210_000, "cached_input_tokens": 200_000, "output_tokens": 10,
             "reasoning_output_tokens": 0, "total_tokens": 210_010}  # fmt: skip
    lines = [
        {"type": "turn_context", "payload": {"model": "gpt-5.3-codex"}},
        {"type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": usage, "last_token_usage": usage}}},
        {"type": "compacted", "payload": {"message": "", "replacement_history": []}},
        {"type": "event_msg", "payload": {"type": "context_compacted"}},
    ]  # fmt: skip
    source = tmp_path / "compacted.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    place_rollout(codex_home, source, THREAD)
    assert reference_last_call(source) == (None, "gpt-5.3-codex")
    result = cli("codex-notify", json.dumps(notification()), env=env)
    assert result.returncode == 0 and result.stderr == b""
    (event,) = HookEvent.objects.all()
    assert event.context_tokens is None
    # Before the compaction line, the same file gives the call's window.
    source.write_text("".join(json.dumps(line) + "\n" for line in lines[:2]))
    place_rollout(codex_home, source, THREAD)
    assert cli("codex-notify", json.dumps(notification()), env=env).returncode == 0
    assert HookEvent.objects.order_by("-received_at", "-id").first().context_tokens == 210_000


def test_no_rollout_records_the_turn_without_a_context(cli, env):
    result = cli("codex-notify", json.dumps(notification()), env=env)
    assert result.returncode == 0 and result.stderr == b""
    (event,) = HookEvent.objects.all()
    assert event.context_tokens is None and event.session_external_id == THREAD


def test_server_down_spools_and_the_next_turn_sends_both(cli, env):
    down = {**env, "CONTEXT_GOVERNANCE_URL": closed_port_url()}
    result = cli("codex-notify", json.dumps(notification(**{"turn-id": "1"})), env=down)
    assert result.returncode == 0 and result.stdout == b""
    assert "context-governance codex-notify: not sent" in result.stderr.decode()
    assert not HookEvent.objects.exists()
    assert (
        cli("codex-notify", json.dumps(notification(**{"turn-id": "2"})), env=env).returncode == 0
    )
    assert sorted(e.payload["turn-id"] for e in HookEvent.objects.all()) == ["1", "2"]


@pytest.mark.parametrize(
    "args",
    [["codex-notify"], ["codex-notify", "{truncated"], ["codex-notify", '"a string"']],
)
def test_malformed_notification_exits_0_and_sends_nothing(cli, env, args):
    result = cli(*args, env=env)
    assert result.returncode == 0 and result.stdout == b""
    assert "the last argument is not a JSON object" in result.stderr.decode()
    assert not HookEvent.objects.exists()


def test_other_notification_types_are_ignored(cli, env):
    result = cli("codex-notify", json.dumps({"type": "approval-requested"}), env=env)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert not HookEvent.objects.exists()


# --- install-hooks --codex ------------------------------------------------------------------

OTHER = """# my Codex settings
model = "gpt-5.3-codex"
model_auto_compact_token_limit = 180000

[otel]
environment = "dev"
exporter = { otlp-http = { endpoint = "http://localhost:4318/v1/logs", protocol = "json" } }

[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "7000"]"""  # no newline at the end, on purpose

COMMAND = "/opt/cg/bin/context-governance"


def install(cli, env, *extra):
    return cli("install-hooks", "--codex", "--command", COMMAND, *extra, env=env)


@pytest.mark.parametrize("original", [None, "", OTHER], ids=["no file", "empty", "other settings"])
def test_installer_is_idempotent_and_uninstall_restores_exactly(cli, env, original):
    path = Path(env["CODEX_HOME"]) / "config.toml"
    if original is not None:
        path.parent.mkdir(parents=True)
        path.write_text(original)
    dry = install(cli, env, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f'+notify = ["{COMMAND}", "codex-notify"]' in dry.stdout.decode()
    assert path.exists() == (original is not None)
    assert original is None or path.read_text() == original  # the dry run wrote nothing
    first = install(cli, env)
    assert first.returncode == 0, first.stderr
    installed = path.read_text()
    parsed = tomllib.loads(installed)
    assert parsed.pop("notify") == [COMMAND, "codex-notify"]
    assert parsed == tomllib.loads(original or "")  # every other setting as it was
    second = install(cli, env)
    assert second.returncode == 0 and "nothing to change" in second.stdout.decode()
    assert path.read_text() == installed
    removed = cli("uninstall-hooks", "--codex", env=env)
    assert removed.returncode == 0, removed.stderr
    if original is None:
        assert not path.exists()
    else:
        assert path.read_bytes() == original.encode()
    again = cli("uninstall-hooks", "--codex", env=env)
    assert again.returncode == 0


def test_a_users_notify_is_kept_unless_replaced_and_then_restored(cli, env):
    path = Path(env["CODEX_HOME"]) / "config.toml"
    path.parent.mkdir(parents=True)
    original = 'notify = ["notify-send", "Codex"]\n' + OTHER + "\n"
    path.write_text(original)
    kept = install(cli, env)
    assert kept.returncode == 0
    assert "Kept your notify program" in kept.stderr.decode()
    assert path.read_text() == original
    replaced = install(cli, env, "--replace-notify")
    assert replaced.returncode == 0, replaced.stderr
    assert tomllib.loads(path.read_text())["notify"] == [COMMAND, "codex-notify"]
    assert "notify-send" not in path.read_text()
    assert cli("uninstall-hooks", "--codex", env=env).returncode == 0
    assert path.read_text() == original


def test_uninstall_without_the_record_removes_only_our_line(cli, env):
    path = Path(env["CODEX_HOME"]) / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(OTHER + "\n")
    assert install(cli, env).returncode == 0
    (cli.config_dir / "installs.json").unlink()
    assert cli("uninstall-hooks", "--codex", env=env).returncode == 0
    assert path.read_text() == OTHER + "\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model = \n", "not valid TOML"),
        ('notify = [\n  "notify-send",\n  "Codex",\n]\n', "spans several lines"),
    ],
)
def test_installer_refuses_what_it_cannot_edit_safely(cli, env, text, message):
    path = Path(env["CODEX_HOME"]) / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    result = install(cli, env, "--replace-notify")
    assert result.returncode == 1 and message in result.stderr.decode()
    assert path.read_text() == text
