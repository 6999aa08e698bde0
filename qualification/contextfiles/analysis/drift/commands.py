"""check_commands: the commands the file names, and whether each was verified lately."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from qualification.contextfiles.analysis.drift.findings import (
    ERROR,
    STALE_VERIFICATION_DAYS,
    WARNING,
    Finding,
)
from qualification.contextfiles.analysis.parsing import (
    ParsedFile,
    looks_like_command,
)

# --- commands --------------------------------------------------------------------


@dataclass(frozen=True)
class NamedCommand:
    command: str
    line: int
    position: int


@dataclass(frozen=True)
class Verification:
    passed: bool
    exit_code: int | None
    verified_at: datetime
    verified_by: str = ""


def normalise_command(command: str) -> str:
    return re.sub(r"\s+", " ", command.strip().lstrip("$").strip())


_FORBIDDEN_RUN = re.compile(
    r"\b(?:never|do not|don't|must not|mustn't)\s+(?:run|use|call|execute|invoke)\b", re.IGNORECASE
)


def named_commands(parsed: ParsedFile) -> list[NamedCommand]:
    """Commands in shell blocks (prompt lines only when a block has `$ ` prompts) and spans.

    Commands on a line that forbids running them ("never run `make seed`") are not listed:
    they are not meant to be exercised.
    """
    commands: dict[str, NamedCommand] = {}
    for instruction in parsed.instructions:
        lines = instruction.text.split("\n")
        in_fence, fence_lines = False, []
        for offset, line in enumerate(lines):
            if line.strip().startswith(("```", "~~~")):
                if in_fence:
                    _fence_commands(fence_lines, instruction, commands)
                    fence_lines = []
                in_fence = not in_fence
                continue
            if in_fence:
                fence_lines.append((instruction.line_start + offset, line))
                continue
            if _FORBIDDEN_RUN.search(line):
                continue
            for span in re.findall(r"`([^`\n]+)`", line):
                if looks_like_command(span):
                    _remember(commands, span, instruction.line_start + offset, instruction)
        if in_fence:
            _fence_commands(fence_lines, instruction, commands)
    return sorted(commands.values(), key=lambda c: c.line)


def _fence_commands(lines, instruction, commands) -> None:
    prompted = [(n, t) for n, t in lines if t.lstrip().startswith("$ ")]
    for number, text in prompted or lines:
        stripped = text.strip()
        if stripped and not stripped.startswith("#") and (prompted or looks_like_command(stripped)):
            _remember(commands, stripped, number, instruction)


def _remember(commands, raw: str, line: int, instruction) -> None:
    command = normalise_command(raw)
    if command and command not in commands:
        commands[command] = NamedCommand(command, line, instruction.position)


def check_commands(
    commands: list[NamedCommand],
    verifications: Mapping[str, Verification],
    *,
    today: date,
    stale_after_days: int = STALE_VERIFICATION_DAYS,
) -> list[Finding]:
    findings = []
    for named in commands:
        verification = verifications.get(named.command)
        data = {"command": named.command}
        if verification is None:
            findings.append(
                Finding("commands", WARNING, f"`{named.command}` has never been verified.",
                        line=named.line, position=named.position, data=data)
            )  # fmt: skip
        elif not verification.passed:
            code = "" if verification.exit_code is None else f" (exit {verification.exit_code})"
            findings.append(
                Finding(
                    "commands", ERROR,
                    f"`{named.command}` failed when last verified{code} on "
                    f"{verification.verified_at:%Y-%m-%d}.",
                    line=named.line, position=named.position, data=data,
                )
            )  # fmt: skip
        elif (today - verification.verified_at.date()).days > stale_after_days:
            findings.append(
                Finding(
                    "commands", WARNING,
                    f"`{named.command}` was last verified on {verification.verified_at:%Y-%m-%d}, "
                    f"more than {stale_after_days} days ago.",
                    line=named.line, position=named.position, data=data,
                )
            )  # fmt: skip
    return findings
