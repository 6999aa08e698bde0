"""`install-hooks --codex` and `uninstall-hooks --codex`: the `notify` entry in Codex's
`config.toml` ($CODEX_HOME, default ~/.codex).

The file is edited as text, one line, so the user's comments and layout stay as they are:
`notify` is a top-level key, so the line goes first in the file (before any table). An
existing `notify` that is not ours is kept unless `--replace-notify` (then uninstalling puts
it back). What was added is recorded in `<config dir>/installs.json`; uninstalling removes
exactly that line and restores the file byte for byte when nothing else changed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from pathlib import Path

from context_governance_cli import config
from context_governance_cli.install import (
    Change,
    InstallError,
    _manifest_path,
    read_settings_text,
)

MARK = "  # added by context-governance"
SUBCOMMAND = "codex-notify"
NOTIFY_LINE = re.compile(r"^\s*notify\s*=")
TABLE_LINE = re.compile(r"^\s*\[")


def config_path(env=os.environ) -> Path:
    from context_governance_cli.codex import codex_home

    return codex_home(env) / "config.toml"


def hooks_path(env=os.environ) -> Path:
    """Codex's user-level hooks file: `hooks.json` beside config.toml (codex-rs/hooks
    discovery reads `<config folder>/hooks.json` and `[hooks]` in config.toml)."""
    from context_governance_cli.codex import codex_home

    return codex_home(env) / "hooks.json"


def default_argv() -> list[str]:
    return [shutil.which("context-governance") or "context-governance", SUBCOMMAND]


def _load(path: Path) -> tuple[str | None, dict]:
    text = read_settings_text(path)
    if text is None:
        return None, {}
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path}: not valid TOML ({exc}); fix it, then run again.") from None


def _line(argv: list[str]) -> str:
    # A JSON string is a TOML basic string (same quotes and escapes).
    return f"notify = [{', '.join(json.dumps(a) for a in argv)}]{MARK}"


def _is_ours(value) -> bool:
    return (
        isinstance(value, list)
        and len(value) >= 2
        and value[-1] == SUBCOMMAND
        and "context-governance" in str(value[0]).replace("_", "-")
    )


def _top_level_notify_line(lines: list[str]) -> int | None:
    """The index of the one-line top-level `notify = …`, or None."""
    for index, line in enumerate(lines):
        if TABLE_LINE.match(line):
            return None
        if NOTIFY_LINE.match(line):
            try:
                return index if "notify" in tomllib.loads(line) else None
            except tomllib.TOMLDecodeError:
                return None  # the value goes on over the next lines
    return None


def plan_install(path: Path, *, argv: list[str], replace: bool = False) -> Change:
    text, data = _load(path)
    manifest = config.read_json(_manifest_path()).get(str(path))
    ours = _line(argv)
    if "notify" in data and (_is_ours(data["notify"]) or not replace):
        notes = []
        if not _is_ours(data["notify"]):
            notes.append(
                f"Kept your notify program {data['notify']!r}: Codex runs one. Add "
                "--replace-notify to use context-governance's (uninstall-hooks puts yours "
                "back)."
            )
        return Change(path=path, before=text, after=text, notes=notes, record=manifest)
    lines = (text or "").splitlines(keepends=True)
    previous = None
    if "notify" in data:  # replace the user's one-line notify
        index = _top_level_notify_line(lines)
        if index is None:
            raise InstallError(
                f"{path}: `notify` spans several lines; replace it by hand with: {ours}"
            )
        previous = lines.pop(index)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    after = "".join([ours + "\n", *lines])
    try:
        parsed = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        parsed = {}
    if parsed.get("notify") != argv:  # never write a file Codex would read differently
        raise InstallError(f"{path}: could not add `notify` safely; add by hand: {ours}")
    record = {"harness": "codex", "original": text, "line": ours, "previous": previous}
    return Change(path=path, before=text, after=after, record=record)


def plan_uninstall(path: Path) -> Change:
    text, _ = _load(path)
    record = config.read_json(_manifest_path()).get(str(path))
    if text is None:
        return Change(path=path, before=None, after=None, record=record)
    lines = text.splitlines(keepends=True)
    if record is not None:
        found = [i for i, line in enumerate(lines) if line.rstrip("\n") == record["line"]]
    else:  # no record (it was deleted): any line we would have written
        found = [
            i
            for i, line in enumerate(lines)
            if line.rstrip("\n").endswith(MARK)
            and NOTIFY_LINE.match(line)
            and _is_ours(tomllib.loads(line.split(MARK)[0]).get("notify"))
        ]
    if not found:
        return Change(path=path, before=text, after=text, record=record)
    index = found[0]
    del lines[index]
    if record is not None and record.get("previous"):
        lines.insert(index, record["previous"])
    after = "".join(lines)
    if record is not None and after.rstrip("\n") == (record["original"] or "").rstrip("\n"):
        after = record["original"]  # None: the file did not exist; it is removed
    return Change(path=path, before=text, after=after, record=record)
