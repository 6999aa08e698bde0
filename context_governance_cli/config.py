"""Where the command finds its server and token, and where it keeps its files.

The server URL and token come from `CONTEXT_GOVERNANCE_URL` and `CONTEXT_GOVERNANCE_TOKEN`,
or else from the config file `login` writes (`<config dir>/config.json`, mode 0600). The
config dir is `$CONTEXT_GOVERNANCE_CONFIG_DIR`, `$XDG_CONFIG_HOME/context-governance`, or
`~/.config/context-governance` (`%APPDATA%\\context-governance` on Windows); the cache and
the hook spool live in `$CONTEXT_GOVERNANCE_CACHE_DIR`, `$XDG_CACHE_HOME/context-governance`
or `~/.cache/context-governance`.
"""

from __future__ import annotations

import os
import sys

from context_governance_cli import fastjson

TYPE_CHECKING = False  # typing itself is a slow import for the status line
if TYPE_CHECKING:
    from pathlib import Path

APP = "context-governance"

# The status line's warm path uses the string forms: importing pathlib (with fnmatch, re and
# urllib.parse behind it) costs more than the rest of the status line.


def config_dir_str() -> str:
    if os.environ.get("CONTEXT_GOVERNANCE_CONFIG_DIR"):
        return os.environ["CONTEXT_GOVERNANCE_CONFIG_DIR"]
    if sys.platform == "win32" and os.environ.get("APPDATA"):
        return os.path.join(os.environ["APPDATA"], APP)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, APP)


def cache_dir_str() -> str:
    if os.environ.get("CONTEXT_GOVERNANCE_CACHE_DIR"):
        return os.environ["CONTEXT_GOVERNANCE_CACHE_DIR"]
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return os.path.join(os.environ["LOCALAPPDATA"], APP, "cache")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, APP)


def config_dir() -> Path:
    from pathlib import Path

    return Path(config_dir_str())


def cache_dir() -> Path:
    from pathlib import Path

    return Path(cache_dir_str())


def config_path() -> Path:
    return config_dir() / "config.json"


class Settings:
    """The server and token, and where they came from ("environment", "config file" or "").
    A plain class: `dataclasses` would import `inspect`, 5 ms of every status line."""

    __slots__ = ("source", "token", "url")

    def __init__(self, *, url: str, token: str, source: str):
        self.url, self.token, self.source = url, token, source

    @property
    def configured(self) -> bool:
        return bool(self.url and self.token)


def read_json(path: str | Path) -> dict:
    """A JSON object from a file; {} when the file is missing or unreadable."""
    try:
        with open(path, "rb") as handle:
            data = fastjson.loads(handle.read() or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_settings() -> Settings:
    url = os.environ.get("CONTEXT_GOVERNANCE_URL", "").strip()
    token = os.environ.get("CONTEXT_GOVERNANCE_TOKEN", "").strip()
    source = "environment" if url or token else ""
    if not (url and token):
        saved = read_json(os.path.join(config_dir_str(), "config.json"))
        url = url or str(saved.get("url", "")).strip()
        token = token or str(saved.get("token", "")).strip()
        if saved and not source:
            source = "config file"
    return Settings(url=url.rstrip("/"), token=token, source=source)


def write_private_json(path: Path, data: dict) -> None:
    """Write JSON readable by the owner only (0600; the directory 0700), atomically."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    os.chmod(temporary, 0o600)  # in case the file existed with a wider mode
    os.replace(temporary, path)


def write_cache_json(path: str | Path, data: dict) -> None:
    """Write a cache file atomically; failures are ignored (the cache is an optimisation)."""
    import json

    path = os.fspath(path)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        temporary = os.path.join(
            os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp"
        )
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(temporary, path)
    except OSError:
        pass
