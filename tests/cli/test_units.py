"""The command's pure parts: model ids, the compaction threshold, the transcript tail, the
line; and that the package imports no Django and is installed as a console script."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import import_module

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_governance_cli import fastjson
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


# --- the warm status line's imports, and its JSON decoder -----------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def same_outcome(data):
    """(kind, value) from json.loads and fastjson.loads: equal values, or both ValueError."""
    outcomes = []
    for loads in (json.loads, fastjson.loads):
        try:
            outcomes.append(("value", repr(loads(data))))
        except ValueError:
            outcomes.append(("error", None))
    return outcomes


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.sampled_from([None, 2]), st.sampled_from(["", " ", "\n\t ", "\r\n"]))
def test_fastjson_reads_what_json_writes(value, indent, pad):
    text = pad + json.dumps(value, indent=indent, ensure_ascii=indent is None) + pad
    assert fastjson.loads(text) == json.loads(text)
    assert fastjson.loads(text.encode()) == json.loads(text.encode())


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.binary(max_size=40)))
def test_fastjson_agrees_with_json_on_any_input(data):
    first, second = same_outcome(data)
    assert first == second


@pytest.mark.parametrize(
    "data",
    [b"", b"   ", b"{", b'{"a": 1} x', b"[1, 2,]", b'"\\ud800"', b"NaN", b"-Infinity",
     b'\xef\xbb\xbf{"bom": 1}', '{"a": 1}'.encode("utf-16"), b"\xff\xfe", b'{"a":"\x01"}',
     "\ufeff{}", b"1e400", b'{"a": 1, "a": 2}'],
)  # fmt: skip
def test_fastjson_edge_cases_match_json(data):
    first, second = same_outcome(data)
    assert first == second


def test_the_warm_status_line_imports_only_these_modules(tmp_path):
    """The installed script's path (`from context_governance_cli.main import main`), without
    site (a regular install has no editable finder): with the limit in the cache, no json,
    re, pathlib, hashlib, typing or HTTP code is imported."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
        "CONTEXT_GOVERNANCE_URL": "http://127.0.0.1:9",
        "CONTEXT_GOVERNANCE_TOKEN": "t",
        "CONTEXT_GOVERNANCE_CONFIG_DIR": str(tmp_path / "config"),
        "CONTEXT_GOVERNANCE_CACHE_DIR": str(tmp_path / "cache"),
    }
    import context_governance_cli.config as cli_config
    from context_governance_cli import statusline
    from context_governance_cli.config import Settings

    key = statusline._cache_key(
        Settings(url="http://127.0.0.1:9", token="t", source=""), "claude-sonnet-4-20250514"
    )
    answer = {"limit": {"max_context_tokens": 96_000, "reserve_tokens": 9_600,
                        "ecl_tokens": 128_000}}  # fmt: skip
    cli_config.write_cache_json(
        tmp_path / "cache" / "limits.json",
        {key: {"fetched_at": 4_000_000_000, "version": "1", "answer": answer}},
    )
    script = "import sys\nfrom context_governance_cli.main import main\nsys.exit(main())\n"
    result = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", "-c", script, "statusline"],
        input=json.dumps(status_payload()).encode(), capture_output=True, env=env, check=True,
    )  # fmt: skip
    assert result.stdout.decode().startswith("ctx 142k · qualified ECL 128k (111%) · limit 96k")
    imported = {
        line.split("|")[-1].strip()
        for line in result.stderr.decode().splitlines()
        if line.startswith("import time:") and "imported package" not in line
    }
    ours = {m for m in imported if m.split(".")[0] in ("context_governance_cli", "numfmt")}
    assert ours == {
        "context_governance_cli", "context_governance_cli.main", "context_governance_cli.config",
        "context_governance_cli.fastjson", "context_governance_cli.statusline", "numfmt",
    }  # fmt: skip
    heavy = {"json", "re", "pathlib", "hashlib", "_hashlib", "typing", "http.client", "enum",
             "dataclasses", "argparse", "urllib.parse", "socket"}  # fmt: skip
    assert not heavy & imported, heavy & imported


def test_fastjson_in_a_fresh_interpreter_without_json_imported():
    """The C scanner reports a bad document through json.decoder: in a process that has not
    imported json (the status line's), a bad document must still be a ValueError."""
    code = (
        "import sys\n"
        "from context_governance_cli import fastjson\n"
        "out = []\n"
        "for doc in (b'{not json', b'{\"a\": \"\\\\x\"}', b'[1, 2,]', b'{\"a\": 1} x', b''):\n"
        "    try:\n"
        "        fastjson.loads(doc)\n"
        "        out.append('value')\n"
        "    except ValueError:\n"
        "        out.append('ValueError')\n"
        'valid = fastjson.loads(b\'{"a": [1, 2.5, null, true, "\\\\u00e9"]}\')\n'
        "print(out, valid)\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.stdout.strip() == (
        "['ValueError', 'ValueError', 'ValueError', 'ValueError', 'ValueError'] "
        "{'a': [1, 2.5, None, True, 'é']}"
    )
