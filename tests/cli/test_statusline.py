"""`context-governance statusline` as Claude Code runs it: a subprocess fed the status-line
JSON, against the live test server, with the server down, a revoked token, bad input."""

from __future__ import annotations

import json

import pytest

import numfmt
from governance.services import api_token_revoke
from tests.cli.conftest import MODEL_ID, closed_port_url, status_payload, write_transcript

pytestmark = pytest.mark.django_db(transaction=True)


def expected_limit_parts(limit, ctx: int) -> str:
    family = next(
        f for f in limit.justification["families"]
        if f["family"] == limit.justification["weakest_family"]
    )  # fmt: skip
    ecl = family["ecl_tokens"]
    return (
        f"qualified ECL {numfmt.tokens(ecl)} ({round(100 * ctx / ecl)}%) · "
        f"limit {numfmt.tokens(limit.max_context_tokens)} OVER"
    )


def test_cold_then_warm_from_the_cache(cli, live_server, approved_limit, editor_token):
    env = {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
    }
    result = cli("statusline", stdin=json.dumps(status_payload()), env=env)
    assert result.returncode == 0, result.stderr
    line = result.stdout.decode().strip()
    assert line == (
        f"ctx 142k · {expected_limit_parts(approved_limit, 142_000)} · compacts at 200k · $4.12"
    )
    cache = json.loads((cli.cache_dir / "limits.json").read_text())
    (entry,) = cache.values()
    assert entry["version"] == f"{approved_limit.pk}:{approved_limit.approved_at:%Y%m%dT%H%M%S.%f}"
    assert entry["answer"]["limit"]["id"] == approved_limit.pk
    # Warm: the cached answer is used without asking the server (the token is now revoked).
    api_token_revoke(token=editor_token.token, actor=None)
    warm = cli("statusline", stdin=json.dumps(status_payload()), env=env)
    assert warm.stdout.decode().strip() == line


def test_server_down_shows_the_cached_limit_marked_stale(
    cli, live_server, approved_limit, editor_token
):
    env = {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
    }
    assert cli("statusline", stdin=json.dumps(status_payload()), env=env).returncode == 0
    # The cache has expired and the server is unreachable: the same entry, under its key for
    # the unreachable URL, is older than the cache period.
    path = cli.cache_dir / "limits.json"
    cache = json.loads(path.read_text())
    ((key, entry),) = cache.items()
    down = closed_port_url()
    entry["fetched_at"] -= 3600
    path.write_text(json.dumps({key.replace(live_server.url, down, 1): entry}))
    env["CONTEXT_GOVERNANCE_URL"] = down
    result = cli("statusline", stdin=json.dumps(status_payload()), env=env)
    assert result.returncode == 0
    line = result.stdout.decode().strip()
    assert f"limit {numfmt.tokens(approved_limit.max_context_tokens)} OVER (stale)" in line
    assert line.startswith("ctx 142k · qualified ECL 32k (444%)")


def test_server_down_without_a_cache_still_prints_a_line(cli):
    env = {"CONTEXT_GOVERNANCE_URL": closed_port_url(), "CONTEXT_GOVERNANCE_TOKEN": "cg_x"}
    result = cli("statusline", stdin=json.dumps(status_payload()), env=env)
    assert result.returncode == 0
    assert result.stdout.decode().strip() == (
        "ctx 142k · compacts at 200k · $4.12 · context-governance: server unreachable "
        "([Errno 111] Connection refused)"
    )


def test_revoked_token_is_a_short_clear_message(cli, live_server, approved_limit, editor_token):
    api_token_revoke(token=editor_token.token, actor=None)
    env = {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
    }
    result = cli("statusline", stdin=json.dumps(status_payload()), env=env)
    assert result.returncode == 0
    line = result.stdout.decode().strip()
    assert line.startswith(
        "ctx 142k · compacts at 200k · $4.12 · context-governance: token rejected"
    )
    assert "This token was revoked on" in line and "context-governance login" in line


@pytest.mark.parametrize(
    "stdin", [b"", b"{not json", b"[1, 2]", b"\xff\xfe"], ids=["empty", "broken", "list", "bytes"]
)
def test_malformed_input_prints_a_line_and_exits_0(cli, stdin):
    result = cli("statusline", stdin=stdin)
    assert result.returncode == 0
    assert result.stdout.decode().strip() == (
        "ctx ? · context-governance: the status input is not a JSON object"
    )


def test_context_from_the_transcript_when_the_payload_has_no_usage(
    cli, tmp_path, live_server, approved_limit, editor_token
):
    transcript = write_transcript(tmp_path / "t.jsonl", context=90_500)
    payload = status_payload(transcript)
    payload["context_window"]["current_usage"] = None  # as before the first call
    env = {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "150000",
    }
    line = cli("statusline", stdin=json.dumps(payload), env=env).stdout.decode().strip()
    assert line.startswith("ctx 90.5k · qualified ECL 32k (283%)")
    assert "compacts at 150k · $4.12" in line


def test_a_named_workload(cli, live_server, approved_limit, editor_token):
    env = {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
        "CONTEXT_GOVERNANCE_WORKLOAD": "repo",
    }
    line = cli("statusline", stdin=json.dumps(status_payload()), env=env).stdout.decode()
    assert f"limit {numfmt.tokens(approved_limit.max_context_tokens)} OVER" in line
    env["CONTEXT_GOVERNANCE_WORKLOAD"] = "docs"  # no approved limit for that workload
    line = cli("statusline", stdin=json.dumps(status_payload()), env=env).stdout.decode()
    assert line.strip().endswith(f"context-governance: no approved limit for {MODEL_ID}")


def test_no_limit_for_the_model_and_not_logged_in(cli, live_server, editor_token):
    env = {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
    }
    line = cli("statusline", stdin=json.dumps(status_payload()), env=env).stdout.decode()
    assert line.strip().endswith(f"context-governance: no approved limit for {MODEL_ID}")
    line = cli("statusline", stdin=json.dumps(status_payload())).stdout.decode()
    assert "not logged in (run `context-governance login`)" in line


def test_login_writes_a_private_config_the_statusline_uses(
    cli, live_server, approved_limit, editor_token
):
    result = cli("login", "--url", live_server.url, "--token-stdin",
                 stdin=editor_token.plaintext + "\n")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "workspace Team A" in result.stdout.decode()
    path = cli.config_dir / "config.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text()) == {
        "url": live_server.url,
        "token": editor_token.plaintext,
    }
    line = cli("statusline", stdin=json.dumps(status_payload())).stdout.decode()
    assert f"limit {numfmt.tokens(approved_limit.max_context_tokens)}" in line
    assert "workspace Team A" in cli("whoami").stdout.decode()
    bad = cli("login", "--url", live_server.url, "--token-stdin", stdin="cg_wrong\n")
    assert bad.returncode == 1 and "rejected" in bad.stderr.decode()
    assert json.loads(path.read_text())["token"] == editor_token.plaintext  # kept
    assert cli("logout").returncode == 0 and not path.exists()
    assert cli("whoami").returncode == 1
