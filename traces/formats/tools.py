"""Tool-call signatures and file touches, shared by every harness parser. No Django.

A signature token names what a tool call did, coarsely enough to classify a run's task
type: `Read`, `Edit`, `WebSearch`, `Bash:pytest`, `Bash:git-push`, `Bash:gh-pr`, ….
"""

from __future__ import annotations

import re
import shlex

READ_TOOLS = {"Read", "NotebookRead", "view_image", "read_file"}
EDIT_TOOLS = {"Edit", "MultiEdit", "Write", "NotebookEdit", "write_file", "edit_file"}
SHELL_TOOLS = {"Bash", "exec_command", "shell", "local_shell", "run_command", "container.exec"}
PATH_KEYS = ("file_path", "notebook_path", "path", "filename")

# Shell commands whose file arguments are reads.
_SHELL_READERS = {"cat", "head", "tail", "less", "more", "nl", "bat", "sed", "wc"}
# Two-word commands worth distinguishing in a signature.
_SUBCOMMAND_TOOLS = {
    "git",
    "gh",
    "npm",
    "pnpm",
    "yarn",
    "cargo",
    "go",
    "docker",
    "make",
    "uv",
    "poetry",
    "kubectl",
}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.M)
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _words(segment: str) -> list[str]:
    if "'" not in segment and '"' not in segment and "\\" not in segment:
        return segment.split()  # the common case; shlex is slow
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


_SEPARATORS = re.compile(r"&&|\|\||;|\|")
_READ_SEPARATORS = re.compile(r"&&|\|\||;")


def command_head(command: str) -> str:
    """'cd x && FOO=1 pytest -q' -> 'pytest'; 'git push origin' -> 'git-push'."""
    for segment in _SEPARATORS.split(command):
        words = _words(segment)
        if "=" in segment:
            words = [w for w in words if not _ENV_ASSIGNMENT.match(w)]
        while words and words[0] in {"sudo", "env", "time", "nohup", "exec"}:
            words = words[1:]
        if not words or words[0] in {"cd", "export", "source", ".", "set", "echo", "true"}:
            continue
        head = words[0].rsplit("/", 1)[-1]
        if head in {"python", "python3"} and len(words) > 2 and words[1] == "-m":
            return words[2]
        if head in _SUBCOMMAND_TOOLS and len(words) > 1 and not words[1].startswith("-"):
            return f"{head}-{words[1]}"
        return head
    return ""


def shell_reads(command: str) -> list[str]:
    """File paths a simple shell read (`cat f`, `sed -n '1,80p' f`, `head f`) touches."""
    paths: list[str] = []
    for segment in _READ_SEPARATORS.split(command):
        words = _words(segment)
        if not words or words[0].rsplit("/", 1)[-1] not in _SHELL_READERS:
            continue
        for word in words[1:]:
            if word.startswith("-") or word == "|" or re.fullmatch(r"[\d,]+p?", word):
                continue
            if word.startswith(("'", '"')) or "*" in word:
                continue
            if "/" in word or "." in word:
                paths.append(word)
    return paths


def _command_of(tool_input) -> str:
    if isinstance(tool_input, dict):
        for key in ("command", "cmd"):
            value = tool_input.get(key)
            if isinstance(value, list):
                return " ".join(str(v) for v in value)
            if isinstance(value, str):
                return value
    return ""


def signature_and_touches(name: str, tool_input) -> tuple[str, list[tuple[str, str]]]:
    """One signature token and the (mode, path) file touches of a tool call."""
    touches: list[tuple[str, str]] = []
    if name in SHELL_TOOLS:
        command = _command_of(tool_input)
        head = command_head(command)
        touches.extend(("read", path) for path in shell_reads(command))
        return (f"Bash:{head}" if head else "Bash"), touches
    if name == "apply_patch":
        patch = tool_input if isinstance(tool_input, str) else _command_of(tool_input)
        if isinstance(tool_input, dict):
            patch = tool_input.get("input") or tool_input.get("patch") or patch
        touches.extend(("edit", path.strip()) for path in _PATCH_FILE.findall(patch or ""))
        return "Edit", touches
    if (name in READ_TOOLS or name in EDIT_TOOLS) and isinstance(tool_input, dict):
        for key in PATH_KEYS:
            path = tool_input.get(key)
            if isinstance(path, str) and path:
                touches.append(("read" if name in READ_TOOLS else "edit", path))
                break
    if name.startswith("mcp__"):
        parts = name.split("__")
        return f"mcp:{parts[1] if len(parts) > 1 else ''}:{parts[-1]}", touches
    return name, touches


def tool_use_signatures(blocks: list[dict]) -> tuple[list[str], list[tuple[str, str]]]:
    """The signature tokens and file touches of the `tool_use` blocks among content blocks."""
    tokens: list[str] = []
    touches: list[tuple[str, str]] = []
    for block in blocks:
        if block.get("type") == "tool_use":
            token, block_touches = signature_and_touches(
                block.get("name") or "", block.get("input")
            )
            tokens.append(token)
            touches.extend(block_touches)
    return tokens, touches
