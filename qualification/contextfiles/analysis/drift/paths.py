"""check_paths: paths the file mentions that the listing does not hold (or must not)."""

from __future__ import annotations

import re

from qualification.contextfiles.analysis.drift.findings import (
    _CODE,
    INFO,
    WARNING,
    Finding,
)
from qualification.contextfiles.analysis.parsing import (
    ParsedFile,
    ParsedInstruction,
    looks_like_command,
)
from qualification.contextfiles.formats.listing import Listing

# --- paths ---------------------------------------------------------------------

_KNOWN_FILES = re.compile(
    r"^(Makefile|Dockerfile|Justfile|Procfile|Gemfile|Rakefile|Pipfile|LICENSE|README|"
    r"CHANGELOG|CONTRIBUTING|AGENTS\.md|CLAUDE\.md|GEMINI\.md)$"
)
_EXTENSION = re.compile(
    r"\.(py|pyi|md|rst|txt|json|jsonl|toml|yaml|yml|ini|cfg|lock|js|mjs|cjs|jsx|ts|tsx|go|rs|"
    r"rb|java|kt|swift|c|h|cc|cpp|hpp|cs|php|sh|bash|sql|html|css|scss|proto|graphql|tf|env|"
    r"xml|gradle|vue|svelte)$"
)
_BARE_PATH = re.compile(r"(?<![\w@:/.-])(?:\./)?[\w.-]+/[\w./*-]*[\w*/]")


def _path_like(token: str) -> bool:
    token = token.strip().strip(",;:()[]'\"")
    if not token or " " in token or token.startswith(("-", "~", "$", "@", "http", "/")):
        return False
    if any(ch in token for ch in "<>{}=|\\") or "://" in token:
        return False
    if re.fullmatch(r"[\d./]+", token):
        return False
    name = token.rstrip("/").split("/")[-1]
    return "/" in token or bool(_EXTENSION.search(name)) or bool(_KNOWN_FILES.match(name))


_MUST_NOT_EXIST = re.compile(
    r"\b(?:never|do not|don't|must not|mustn't)\s+(?:commit|create|add|check in|push|store)\b",
    re.IGNORECASE,
)


def mentioned_paths(instruction: ParsedInstruction) -> list[str]:
    """Paths an instruction names: in code spans, command arguments and bare a/b tokens.

    Lines that forbid creating or committing something ("never commit `.env`") are skipped:
    those paths are meant to be absent.
    """
    found: list[str] = []
    text = instruction.text
    for line in text.split("\n"):
        if _MUST_NOT_EXIST.search(line):
            continue
        bare = line.strip().removeprefix("$ ")
        if looks_like_command(bare) and "`" not in bare:
            found.extend(arg for arg in bare.split()[1:] if _path_like(arg) and "/" in arg)
        spans = re.findall(r"`([^`\n]+)`", line)
        for span in spans:
            if looks_like_command(span):
                found.extend(arg for arg in span.split()[1:] if _path_like(arg) and "/" in arg)
            elif _path_like(span):
                found.append(span.strip())
        prose = _CODE.sub(" ", line)
        for match in _BARE_PATH.finditer(prose):
            token = match.group(0)
            if token.count("/") >= 2 or token.endswith("/") or _EXTENSION.search(token):
                found.append(token)
    seen, result = set(), []
    for path in found:
        clean = path.strip().strip(",;:()[]'\"").rstrip(".").removeprefix("./")
        if clean and clean not in seen:
            seen.add(clean)
            result.append(clean)
    return result


def check_paths(parsed: ParsedFile, listing: Listing | None) -> list[Finding]:
    if listing is None:
        return [
            Finding(
                "paths", INFO,
                "No repository listing was chosen, so paths were not checked. Upload one "
                "(`git ls-files`, `git ls-tree -r HEAD`, or a tarball).",
            )
        ]  # fmt: skip
    findings = []
    for instruction in parsed.instructions:
        for path in mentioned_paths(instruction):
            present = (
                listing.matches(path) if any(c in path for c in "*?[") else listing.exists(path)
            )
            if not present:
                findings.append(
                    Finding(
                        "paths", WARNING,
                        f"`{path}` is mentioned but is not in the repository listing.",
                        line=instruction.line_start, position=instruction.position,
                        data={"path": path},
                    )
                )  # fmt: skip
    return findings
