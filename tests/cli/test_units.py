"""The command's pure parts: model ids, the compaction threshold, the transcript tail, the
line; and that the package imports no Django and is installed as a console script."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import import_module

import pytest

from context_governance_cli.statusline import (
    compaction_threshold,
    context_tokens,
    format_line,
    transcript_context,
)
from qualification.analysis.limits import model_family_id
from tests.cli.conftest import ROOT, status_payload, write_transcript


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
        ("anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
        ("claude-sonnet-4@20250514", "claude-sonnet-4"),
        ("Claude-Sonnet-4-5[1m]", "claude-sonnet-4-5"),
        ("gpt-5-codex", "gpt-5-codex"),
    ],
)
def test_model_family_id(model_id, family):
    assert model_family_id(model_id) == family


def test_compaction_threshold(tmp_path):
    payload = status_payload()
    payload["workspace"]["project_dir"] = str(tmp_path)
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "user")}
    assert compaction_threshold(payload, env) == 200_000  # the window, by default
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "settings.json").write_text('{"autoCompactWindow": 150000}')
    assert compaction_threshold(payload, env) == 150_000
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.local.json").write_text('{"autoCompactWindow": 120000}')
    assert compaction_threshold(payload, env) == 120_000  # local beats user
    assert compaction_threshold(payload, {**env, "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "350000"}) == (
        200_000  # capped at the window
    )
    assert (
        compaction_threshold(payload, {**env, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}) == 100_000
    )
    assert compaction_threshold(payload, {**env, "DISABLE_AUTO_COMPACT": "1"}) == "off"
    (tmp_path / ".claude" / "settings.json").write_text('{"autoCompactEnabled": false}')
    assert compaction_threshold(payload, env) == "off"


def test_transcript_tail(tmp_path):
    path = write_transcript(tmp_path / "t.jsonl", context=123_456)
    assert transcript_context(str(path)) == 123_456  # the subagent's later call is skipped
    after = write_transcript(tmp_path / "c.jsonl", context=123_456, boundary_last=True)
    assert transcript_context(str(after)) is None  # unknown until the first call after it
    assert transcript_context(str(tmp_path / "missing.jsonl")) is None
    payload = status_payload(path)
    payload["context_window"]["current_usage"] = None
    assert context_tokens(payload) == 123_456
    assert context_tokens(status_payload()) == 142_000


def test_format_line_marks_the_reserve_and_the_limit():
    limit = {"ecl_tokens": 128_000, "max_context_tokens": 96_000, "reserve_tokens": 24_000}
    line = format_line(ctx=142_000, limit=limit, threshold=350_000, cost=4.123)
    assert (
        line == "ctx 142k · qualified ECL 128k (111%) · limit 96k OVER · compacts at 350k · $4.12"
    )
    assert "limit 96k (in reserve)" in format_line(
        ctx=80_000, limit=limit, threshold=None, cost=None
    )
    assert format_line(ctx=50_000, limit=limit, threshold="off", cost=None, note="stale") == (
        "ctx 50k · qualified ECL 128k (39%) · limit 96k (stale) · auto-compact off"
    )
    no_ecl = {"ecl_tokens": None, "ecl_text": "≥ 128k", "max_context_tokens": 96_000}
    assert format_line(ctx=None, limit=no_ecl, threshold=None, cost=None) == (
        "ctx ? · qualified ECL ≥ 128k · limit 96k"
    )


def test_the_client_imports_no_django():
    code = (
        "import sys\n"
        "import context_governance_cli.main, context_governance_cli.statusline\n"
        "import context_governance_cli.hooks, context_governance_cli.install\n"
        "import context_governance_cli.client, context_governance_cli.config\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'rest_framework', 'governance', 'traces', 'qualification'})\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, cwd=ROOT, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert out == "[]"
    lean = subprocess.run(
        [sys.executable, "-c", "import sys, context_governance_cli.main, "
         "context_governance_cli.statusline; print('http.client' in sys.modules)"],
        capture_output=True, cwd=ROOT, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert lean == "False"  # the warm status line path loads no HTTP code


def test_the_console_script_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["scripts"]["context-governance"]
    module, _, name = target.partition(":")
    assert callable(getattr(import_module(module), name))
    assert "context_governance_cli*" in project["tool"]["setuptools"]["packages"]["find"]["include"]
