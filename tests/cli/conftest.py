"""Fixtures for the `context-governance` command: an approved limit for a Claude model, real
status-line and hook payloads, and a runner that starts the command as a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from governance.models import Membership
from governance.services import api_token_create
from qualification import services as qualification_services
from tests.qualification.conftest import STRATA, make_qualification, planted_rows, to_csv

__all__ = ["make_qualification", "planted_rows"]

ROOT = Path(__file__).resolve().parents[2]
MODEL_ID = "claude-sonnet-4-20250514"


@pytest.fixture
def approved_limit(make_qualification, planted_rows, members, run_on_commit):
    """An approved limit for `claude-sonnet-4`, from a planted sweep whose weakest family drops
    after 32k (so its justification carries a finite ECL)."""
    qualification = make_qualification(
        model={"name": "claude-sonnet-4", "version": "2025-05-14"}, strata=STRATA
    )
    with run_on_commit():
        upload = qualification_services.trial_batch_submit(
            qualification=qualification,
            content=to_csv(planted_rows),
            filename="sweep.csv",
            actor=members["editor"],
            run_now=True,
        )
    assert upload.status == "loaded", upload.job.errors
    limit = qualification_services.operating_limit_propose(
        qualification=qualification, actor=members["editor"], name="Sonnet agents"
    )
    return qualification_services.operating_limit_approve(
        limit=limit,
        reviewer=members["admin"],
        membership=Membership.objects.get(user=members["admin"]),
        confirmed=True,
    )


@pytest.fixture
def editor_token(workspace, members):
    return api_token_create(workspace=workspace, user=members["editor"], name="cli")


def status_payload(transcript: Path | None = None, **overrides) -> dict:
    """Claude Code's status-line input (HARNESS_TELEMETRY.md §3), 142k in the window."""
    payload = {
        "hook_event_name": "Status",
        "session_id": "0f1e2d3c-aaaa-bbbb-cccc-000000000001",
        "session_name": "refactor billing",
        "transcript_path": str(transcript or "/nonexistent/transcript.jsonl"),
        "cwd": "/home/dev/billing",
        "version": "2.1.240",
        "model": {"id": MODEL_ID, "display_name": "Sonnet 4"},
        "workspace": {"current_dir": "/home/dev/billing", "project_dir": "/home/dev/billing"},
        "cost": {
            "total_cost_usd": 4.1234,
            "total_duration_ms": 2_400_000,
            "total_api_duration_ms": 900_000,
            "total_lines_added": 120,
            "total_lines_removed": 30,
        },
        "context_window": {
            "total_input_tokens": 142_000,
            "total_output_tokens": 2_100,
            "context_window_size": 200_000,
            "used_percentage": 71,
            "remaining_percentage": 29,
            "current_usage": {
                "input_tokens": 12,
                "output_tokens": 310,
                "cache_creation_input_tokens": 1_988,
                "cache_read_input_tokens": 140_000,
            },
        },
        "exceeds_200k_tokens": False,
    }
    payload.update(overrides)
    return payload


def write_transcript(path: Path, *, context: int, boundary_last: bool = False) -> Path:
    """A Claude Code transcript whose last main-agent call held `context` tokens."""
    lines = [
        {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "fix it"}},
        {
            "type": "assistant",
            "sessionId": "s1",
            "isSidechain": False,
            "message": {
                "model": MODEL_ID,
                "usage": {
                    "input_tokens": 5,
                    "cache_creation_input_tokens": 1_000,
                    "cache_read_input_tokens": context - 1_005,
                    "output_tokens": 200,
                },
            },
        },
        {
            "type": "assistant",
            "sessionId": "s1",
            "isSidechain": True,  # a subagent's call: not the main window
            "message": {"usage": {"input_tokens": 9, "cache_read_input_tokens": 20_000}},
        },
        {"type": "user", "message": {"role": "user", "content": "x" * 200_000}},
    ]
    if boundary_last:
        lines.append(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "compactMetadata": {"trigger": "auto"},
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def cli(tmp_path):
    """Run `python -m context_governance_cli ARGS` with `stdin`; home, config and cache dirs
    in tmp_path. `env` adds or overrides variables."""
    home = tmp_path / "home"
    home.mkdir()

    def run(*args, stdin: bytes | str = b"", env: dict | None = None, timeout: float = 20):
        environment = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "PYTHONPATH": str(ROOT),
            "CONTEXT_GOVERNANCE_CONFIG_DIR": str(tmp_path / "config"),
            "CONTEXT_GOVERNANCE_CACHE_DIR": str(tmp_path / "cache"),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            # The shared test machine is slow; bench.cli measures the default timeouts.
            "CONTEXT_GOVERNANCE_TIMEOUT": "10",
            "CONTEXT_GOVERNANCE_HOOK_TIMEOUT": "10",
            "CONTEXT_GOVERNANCE_LINES_TIMEOUT": "10",
            **(env or {}),
        }
        data = stdin.encode() if isinstance(stdin, str) else stdin
        return subprocess.run(
            [sys.executable, "-m", "context_governance_cli", *args],
            input=data,
            capture_output=True,
            env={k: v for k, v in environment.items() if v is not None},
            cwd=tmp_path,
            timeout=timeout,
        )

    run.home = home
    run.cache_dir = tmp_path / "cache"
    run.config_dir = tmp_path / "config"
    return run
