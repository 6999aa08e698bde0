"""`install-hooks --claude` and `uninstall-hooks --claude`: the hook and status-line entries in
Claude Code's settings.json.

Installing is idempotent and keeps every other setting and hook. What it added is recorded
per settings file in `<config dir>/installs.json`, so uninstalling removes exactly that, and
restores the file byte for byte when nothing else changed in between.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from context_governance_cli import config

HOOKS = (
    ("SessionStart", "session-start"),
    ("PreCompact", "pre-compact"),
    ("PostCompact", "post-compact"),
)
HOOK_TIMEOUT_SECONDS = 5
OUR_COMMAND = re.compile(
    r"context[-_]governance(?:\.exe)?[\"']?(?: -m context_governance_cli)? "
    r"(?:hook (?:--codex )?(?:session-start|pre-compact|post-compact)|statusline)$"
)


class InstallError(Exception):
    pass


def settings_path(*, user: bool, project: str | None, env=os.environ) -> Path:
    if user:
        return Path(env.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "settings.json"
    return Path(project or ".").resolve() / ".claude" / "settings.json"


def default_command() -> str:
    found = shutil.which("context-governance")
    return shlex.quote(found) if found else "context-governance"


def _manifest_path() -> Path:
    return config.config_dir() / "installs.json"


def read_settings_text(path: Path) -> str | None:
    """The file's text, None if it does not exist; another read error is an InstallError."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InstallError(f"{path}: {exc.strerror}") from None


def _load(path: Path) -> tuple[str | None, dict]:
    text = read_settings_text(path)
    if text is None:
        return None, {}
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InstallError(f"{path}: not valid JSON ({exc}); fix it, then run again.") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path}: the settings must be a JSON object.")
    return text, data


def _dump(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _is_ours(handler) -> bool:
    return isinstance(handler, dict) and bool(OUR_COMMAND.search(str(handler.get("command", ""))))


@dataclass
class Change:
    path: Path
    before: str | None
    after: str | None  # None: the file is removed
    notes: list[str] = field(default_factory=list)
    record: dict | None = None  # the manifest entry to store (install) or drop (uninstall)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            (self.after or "").splitlines(keepends=True),
            fromfile=f"{self.path} (now)",
            tofile=f"{self.path} (after)",
        )
        return "".join(lines)


def plan_install(
    path: Path,
    *,
    command: str,
    replace_statusline: bool = False,
    hook: str = "hook",
    statusline: bool = True,
) -> Change:
    """The hook groups (running `<command> <hook> <event>`) and, with `statusline`, the status
    line. Codex's hooks.json has the same `hooks` object as Claude Code's settings.json (its
    `HooksFile`), with `hook --codex` and no status line."""
    text, data = _load(path)
    new = copy.deepcopy(data)
    manifest = config.read_json(_manifest_path()).get(str(path))
    record = manifest or {
        "original": text,
        "created_hooks": "hooks" not in data,
        "created_events": [],
        "added": [],
        "statusline": None,
    }
    notes = []
    hooks = new.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError(f"{path}: `hooks` must be an object.")
    for event, name in HOOKS:
        if event not in hooks:
            record["created_events"].append(event)
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InstallError(f"{path}: `hooks.{event}` must be a list.")
        if any(_is_ours(h) for g in groups if isinstance(g, dict) for h in g.get("hooks") or []):
            continue
        group = {
            "hooks": [
                {
                    "type": "command",
                    "command": f"{command} {hook} {name}",
                    "timeout": HOOK_TIMEOUT_SECONDS,
                }
            ]
        }
        groups.append(group)
        record["added"].append({"event": event, "group": group})
    if statusline:
        notes += _plan_statusline(new, record, command=command, replace=replace_statusline)
    after = _dump(new) if new != data or text is None else text
    return Change(path=path, before=text, after=after, notes=notes, record=record)


def _plan_statusline(new: dict, record: dict, *, command: str, replace: bool) -> list[str]:
    """Set our statusLine in `new` unless another is kept; the notes to show."""
    wanted = {"type": "command", "command": f"{command} statusline", "padding": 0}
    current = new.get("statusLine")
    if current is None:
        new["statusLine"] = wanted
        record["statusline"] = {"action": "added", "written": wanted}
    elif _is_ours(current):
        pass
    elif replace:
        new["statusLine"] = wanted
        record["statusline"] = {"action": "replaced", "written": wanted, "previous": current}
    else:
        return [
            "Kept your statusLine; add --replace-statusline to use context-governance's "
            "(uninstall-hooks puts yours back)."
        ]
    return []


def _remove_ours(data: dict, record: dict | None) -> dict:
    new = copy.deepcopy(data)
    hooks = new.get("hooks") if isinstance(new.get("hooks"), dict) else None
    if record is not None:
        for added in record["added"]:
            groups = (hooks or {}).get(added["event"])
            if isinstance(groups, list) and added["group"] in groups:
                groups.remove(added["group"])
        for event in record["created_events"]:
            if hooks is not None and hooks.get(event) == []:
                del hooks[event]
        if hooks == {} and record["created_hooks"]:
            del new["hooks"]
        statusline = record.get("statusline")
        if statusline and new.get("statusLine") == statusline["written"]:
            if statusline["action"] == "replaced":
                new["statusLine"] = statusline["previous"]
            else:
                del new["statusLine"]
        return new
    # Without a record (it was deleted): remove every entry that runs this command.
    for event, _ in HOOKS:
        groups = (hooks or {}).get(event)
        if not isinstance(groups, list):
            continue
        kept = [
            g
            for g in groups
            if not (isinstance(g, dict) and g.get("hooks") and all(map(_is_ours, g["hooks"])))
        ]
        if kept != groups:
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if hooks == {}:
        del new["hooks"]
    if _is_ours(new.get("statusLine")):
        del new["statusLine"]
    return new


def plan_uninstall(path: Path) -> Change:
    text, data = _load(path)
    record = config.read_json(_manifest_path()).get(str(path))
    if text is None:
        return Change(path=path, before=None, after=None, record=record)
    new = _remove_ours(data, record)
    if new == data:
        after = text
    elif record is not None and new == (_load_text(record["original"])):
        after = record["original"]  # None: the file did not exist; it is removed
    else:
        after = _dump(new)
    return Change(path=path, before=text, after=after, record=record)


def _load_text(text: str | None) -> dict:
    if text is None or not text.strip():
        return {}
    return json.loads(text)


def apply(change: Change, *, install: bool) -> None:
    """Write the settings file (atomically, keeping its mode) and the install record."""
    if change.after is None:
        if change.path.exists():
            change.path.unlink()
    elif change.changed:
        change.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = change.path.with_name(f".{change.path.name}.{os.getpid()}.tmp")
        temporary.write_text(change.after, encoding="utf-8")
        if change.path.exists():
            shutil.copymode(change.path, temporary)
        os.replace(temporary, change.path)
    manifest_path = _manifest_path()
    manifest = config.read_json(manifest_path)
    if install and change.record is not None:
        manifest[str(change.path)] = change.record
    else:
        manifest.pop(str(change.path), None)
    config.write_private_json(manifest_path, manifest)
