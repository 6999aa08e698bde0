"""`install-hooks --claude` / `uninstall-hooks --claude` on temporary settings files."""

from __future__ import annotations

import json

import pytest

OTHER = """{
  "model": "opus",
  "permissions": {"allow": ["Bash(make test)"]},
  "hooks": {
    "PreCompact": [
      {"matcher": "manual", "hooks": [{"type": "command", "command": "./save-notes.sh"}]}
    ],
    "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]
  }
}
"""
COMMAND = "/opt/venv/bin/context-governance"


def install(cli, project, *extra):
    return cli("install-hooks", "--claude", "--project", str(project), "--command", COMMAND,
               *extra)  # fmt: skip


def uninstall(cli, project, *extra):
    return cli("uninstall-hooks", "--claude", "--project", str(project), *extra)


@pytest.mark.parametrize(
    "original", [None, "", "{}\n", OTHER], ids=["none", "blank", "empty", "other-hooks"]
)
def test_install_twice_then_uninstall_restores_the_file(cli, tmp_path, original):
    project = tmp_path / "repo"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    if original is not None:
        settings.write_text(original)
    assert install(cli, project).returncode == 0
    first = settings.read_text()
    data = json.loads(first)
    for event, name in (
        ("SessionStart", "session-start"),
        ("PreCompact", "pre-compact"),
        ("PostCompact", "post-compact"),
    ):
        ours = [
            h for g in data["hooks"][event] for h in g["hooks"]
            if h["command"] == f"{COMMAND} hook {name}"
        ]  # fmt: skip
        assert ours == [{"type": "command", "command": f"{COMMAND} hook {name}", "timeout": 5}]
    assert data["statusLine"] == {
        "type": "command",
        "command": f"{COMMAND} statusline",
        "padding": 0,
    }
    if original == OTHER:
        before = json.loads(OTHER)
        assert data["model"] == "opus" and data["permissions"] == before["permissions"]
        assert data["hooks"]["Stop"] == before["hooks"]["Stop"]
        assert data["hooks"]["PreCompact"][0] == before["hooks"]["PreCompact"][0]
    second = install(cli, project)
    assert second.returncode == 0 and "nothing to change" in second.stdout.decode()
    assert settings.read_text() == first
    assert uninstall(cli, project).returncode == 0
    if original is None:
        assert not settings.exists()
    else:
        assert settings.read_text() == original  # byte for byte
    again = uninstall(cli, project)
    assert again.returncode == 0 and "nothing to change" in again.stdout.decode()


def test_dry_run_shows_the_diff_and_writes_nothing(cli, tmp_path):
    project = tmp_path / "repo"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(OTHER)
    result = install(cli, project, "--dry-run")
    assert result.returncode == 0
    diff = result.stdout.decode()
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+")]
    assert f'"command": "{COMMAND} hook pre-compact",' in added
    assert f'"command": "{COMMAND} statusline",' in added
    assert diff.startswith(f"--- {settings} (now)\n+++ {settings} (after)\n")
    assert settings.read_text() == OTHER
    assert not (cli.config_dir / "installs.json").exists()


def test_an_existing_status_line_is_kept_unless_replaced(cli, tmp_path):
    project = tmp_path / "repo"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = '{"statusLine": {"type": "command", "command": "~/bin/my-status"}}'
    settings.write_text(original)
    kept = install(cli, project)
    assert "Kept your statusLine" in kept.stderr.decode()
    assert json.loads(settings.read_text())["statusLine"]["command"] == "~/bin/my-status"
    assert uninstall(cli, project).returncode == 0
    assert settings.read_text() == original
    assert install(cli, project, "--replace-statusline").returncode == 0
    assert json.loads(settings.read_text())["statusLine"]["command"] == f"{COMMAND} statusline"
    # The user adds a setting meanwhile: uninstalling keeps it and puts their status line back.
    data = json.loads(settings.read_text())
    data["theme"] = "dark"
    settings.write_text(json.dumps(data))
    assert uninstall(cli, project).returncode == 0
    assert json.loads(settings.read_text()) == {
        "statusLine": {"type": "command", "command": "~/bin/my-status"},
        "theme": "dark",
    }


def test_user_settings_and_a_file_that_is_not_json(cli):
    user_settings = cli.home / ".claude" / "settings.json"
    result = cli("install-hooks", "--claude", "--user", "--command", COMMAND)
    assert result.returncode == 0, result.stderr
    assert json.loads(user_settings.read_text())["statusLine"]["command"] == f"{COMMAND} statusline"
    user_settings.write_text("{,")
    broken = cli("install-hooks", "--claude", "--user", "--command", COMMAND)
    assert broken.returncode == 1
    assert f"{user_settings}: not valid JSON" in broken.stderr.decode()
    assert user_settings.read_text() == "{,"


def test_uninstall_without_the_record_removes_only_our_entries(cli, tmp_path):
    project = tmp_path / "repo"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(OTHER)
    assert install(cli, project).returncode == 0
    (cli.config_dir / "installs.json").unlink()
    assert uninstall(cli, project).returncode == 0
    assert json.loads(settings.read_text()) == json.loads(OTHER)
