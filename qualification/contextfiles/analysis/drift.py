"""Mechanical drift checks on a parsed context file. Pure: parsed file (+ listing) in, findings out.

Each check is documented, with its heuristic, in docs/context-files.md:
`check_counts`, `check_paths`, `check_commands`, `check_generated`,
`check_contradictions` and `check_duplicates`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime

from qualification.contextfiles.analysis.parsing import (
    SECTION_SEPARATOR,
    ParsedFile,
    ParsedInstruction,
    looks_like_command,
)
from qualification.contextfiles.formats.listing import Listing

ERROR, WARNING, INFO = "error", "warning", "info"
STALE_VERIFICATION_DAYS = 90
DUPLICATE_SIMILARITY = 0.9
MIN_FINGERPRINT_LENGTH = 7


@dataclass(frozen=True)
class Finding:
    check: str  # counts, paths, commands, generated, contradictions, duplicates
    severity: str
    message: str
    line: int | None = None
    position: int | None = None  # the instruction's position in its revision
    data: dict = field(default_factory=dict)


# --- counts --------------------------------------------------------------------

NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
}  # fmt: skip
COUNTED_NOUNS = (
    "rules|services|commands|steps|conventions|instructions|checks|principles|guidelines|"
    "sections|packages|modules|apps|applications|components|workers|tools|skills|agents|"
    "endpoints|microservices|libraries|crates|prohibitions|constraints|requirements|tips|"
    "gotchas|pitfalls|scripts|stages|phases|plugins|repositories|repos|databases|queues"
)
_CLAIM = re.compile(
    r"(?<![\w.$-])(?P<number>\d{1,4}|" + "|".join(NUMBER_WORDS) + r")"
    r"\s+(?:[A-Za-z-]+\s+)?(?P<noun>" + COUNTED_NOUNS + r")\b",
    re.IGNORECASE,
)
_APPROXIMATE = re.compile(
    r"\b(?:about|around|approximately|roughly|over|more than|at least|up to|nearly|almost|"
    r"fewer than|less than|under|some|~)\s*$",
    re.IGNORECASE,
)
_CODE = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class CountClaim:
    number: int
    noun: str
    line: int
    position: int | None
    text: str


def _singular(noun: str) -> str:
    noun = noun.lower()
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    return noun[:-1] if noun.endswith("s") else noun


def find_claims(parsed: ParsedFile) -> list[CountClaim]:
    """Counts the file states about itself or the repository ("35 rules", "three services")."""
    sources: list[tuple[str, int, int | None]] = [(s.title, s.line, None) for s in parsed.sections]
    sources += [(lead.text, lead.line, None) for lead in parsed.lead_ins]
    sources += [(i.text, i.line_start, i.position) for i in parsed.instructions]
    claims = []
    for text, first_line, position in sources:
        for offset, line_text in enumerate(text.split("\n")):
            prose = _CODE.sub(" ", line_text)
            for match in _CLAIM.finditer(prose):
                if _APPROXIMATE.search(prose[: match.start()]):
                    continue
                raw = match["number"].lower()
                number = NUMBER_WORDS.get(raw) or int(raw)
                claims.append(
                    CountClaim(number, match["noun"].lower(), first_line + offset, position,
                               match.group(0))
                )  # fmt: skip
    return sorted(claims, key=lambda c: c.line)


def check_counts(parsed: ParsedFile, listing: Listing | None = None) -> list[Finding]:
    findings: list[Finding] = []
    claims = find_claims(parsed)
    for claim in claims:
        actual = _count_for(claim, parsed, listing)
        if actual is None:
            continue
        counted, where = actual
        if counted != claim.number:
            findings.append(
                Finding(
                    "counts", ERROR,
                    f"Claims “{claim.text}” but {where} has {counted}.",
                    line=claim.line, position=claim.position,
                    data={"claimed": claim.number, "actual": counted, "noun": claim.noun,
                          "counted_in": where},
                )
            )  # fmt: skip
    by_noun: dict[str, list[CountClaim]] = {}
    for claim in claims:
        by_noun.setdefault(_singular(claim.noun), []).append(claim)
    for noun, group in by_noun.items():
        numbers = sorted({c.number for c in group})
        if len(numbers) > 1:
            places = ", ".join(f"{c.number} (line {c.line})" for c in group)
            findings.append(
                Finding(
                    "counts", WARNING,
                    f"The file gives {len(numbers)} different counts of {noun}s: {places}.",
                    line=group[0].line, position=group[0].position,
                    data={"noun": noun, "claims": [[c.number, c.line] for c in group]},
                )
            )  # fmt: skip
    return findings


def _count_for(
    claim: CountClaim, parsed: ParsedFile, listing: Listing | None
) -> tuple[int, str] | None:
    singular = _singular(claim.noun)
    for lead in parsed.lead_ins:
        if lead.line == claim.line:
            return lead.item_count, "the list that follows"
    for section in parsed.sections:
        title = section.title.lower()
        if section.line != claim.line and re.search(rf"\b{re.escape(singular)}s?\b", title):
            total = sum(
                1
                for i in parsed.instructions
                if (
                    i.section == section.path
                    or i.section.startswith(section.path + SECTION_SEPARATOR)
                )
                and i.kind in {"item", "table_row"}
            )
            if total:
                return total, f"the section “{section.title}”"
    if listing is not None:
        for directory in sorted(listing.directories, key=lambda d: (d.count("/"), d)):
            if directory.split("/")[-1].lower() in {claim.noun, singular}:
                children = listing.children(directory)
                if children:
                    return len(children), f"the repository folder `{directory}/`"
    if singular in {"rule", "instruction"}:
        return len(parsed.instructions), "the whole file (instructions)"
    return None


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


# --- generated sections ----------------------------------------------------------


def check_generated(parsed: ParsedFile, listing: Listing | None) -> list[Finding]:
    findings = []
    for section in parsed.generated:
        where = {"line": section.line_start}
        data = {"source": section.source, "fingerprint": section.fingerprint}
        if section.line_end is None:
            findings.append(Finding("generated", WARNING, "A generated section is never closed "
                                    "with <!-- end generated -->.", data=data, **where))  # fmt: skip
        if not section.source:
            findings.append(Finding("generated", WARNING, "A generated section names no source "
                                    "(from=…), so it cannot be tied to one.", data=data, **where))  # fmt: skip
            continue
        recorded = section.fingerprint.lower().split(":")[-1]
        if len(recorded) < MIN_FINGERPRINT_LENGTH:
            findings.append(
                Finding("generated", WARNING, f"The section generated from `{section.source}` "
                        "records no fingerprint (fingerprint=…), so drift cannot be detected.",
                        data=data, **where)
            )  # fmt: skip
            continue
        if listing is None or not listing.hashes:
            findings.append(
                Finding("generated", INFO, f"Cannot verify the section generated from "
                        f"`{section.source}`: choose a listing with hashes (`git ls-tree -r HEAD` "
                        "or `sha256sum` output).", data=data, **where)
            )  # fmt: skip
            continue
        current = listing.hash_of(section.source)
        if not listing.exists(section.source):
            findings.append(Finding("generated", ERROR, f"The source `{section.source}` of a "
                                    "generated section is not in the repository.", data=data,
                                    **where))  # fmt: skip
        elif not current:
            findings.append(Finding("generated", INFO, f"The listing has no hash for "
                                    f"`{section.source}`.", data=data, **where))  # fmt: skip
        elif not (current.startswith(recorded) or recorded.startswith(current)):
            findings.append(
                Finding(
                    "generated", ERROR,
                    f"The section generated from `{section.source}` is stale: it records "
                    f"fingerprint {recorded[:12]}, the source is now {current[:12]}.",
                    data=data | {"current": current}, **where,
                )
            )  # fmt: skip
    return findings


# --- contradictions ---------------------------------------------------------------

TOOL_FAMILIES = {
    "JavaScript package manager": ("npm", "pnpm", "yarn", "bun"),
    "Python package manager": ("pip", "poetry", "uv", "pipenv", "conda", "pdm", "hatch"),
    "Python test runner": ("pytest", "unittest", "nose2"),
    "JavaScript test runner": ("jest", "vitest", "mocha", "jasmine", "ava"),
    "Python formatter": ("black", "yapf", "autopep8", "ruff format"),
    "JavaScript formatter": ("prettier", "biome", "dprint"),
    "type checker": ("mypy", "pyright", "pytype"),
}
_NEGATION = re.compile(r"\b(never|not|don't|do not|avoid|instead of|rather than|no longer)\b", re.I)
_PRESCRIBE = re.compile(r"\b(use|uses|using|run|runs|with|via|prefer|is|are|through)\b", re.I)
_LANG_VERSION = re.compile(
    r"\b(?P<lang>python|node(?:\.js)?|java|go|ruby|rust|php|typescript|postgres(?:ql)?)\s+"
    r"(?:version\s+)?v?(?P<version>\d+(?:\.\d+){0,2})\b",
    re.I,
)
_SETTING = re.compile(
    r"(?P<subject>(?:[A-Za-z][\w-]*\s+){0,3}?[A-Za-z][\w-]*)\s*"
    r"(?:\bis\b|\bare\b|\bmust be\b|\bshould be\b|=|:|\bof\b|\bset to\b|\bdefaults to\b)\s*"
    r"(?P<value>\d+(?:\.\d+)?\s*(?:%|ms|s|seconds?|minutes?|hours?|days?|characters?|chars?|"
    r"columns?|lines?|spaces?|tokens?|mb|gb|kb|k)?)(?!\w|\.\d)",
    re.I,
)
_MEASURE = re.compile(
    r"(?P<value>\d+)[ -](?P<unit>spaces?|characters?|chars?|columns?)\s+(?:for\s+)?"
    r"(?P<subject>indentation|indents?|lines?|line length|line width)\b",
    re.I,
)
_POLARITY = re.compile(
    r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\*\*)?(?P<modal>always|never|do not|don't|must not|"
    r"must|you must|make sure to|ensure you|do)\b(?:\*\*)?\s+(?P<action>[^.;\n]+)",
    re.I,
)
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "for",
        "and",
        "or",
        "with",
        "your",
        "you",
        "our",
        "we",
        "it",
        "this",
        "that",
        "these",
        "those",
        "be",
        "is",
        "are",
        "before",
        "after",
        "any",
        "all",
        "every",
        "each",
        "when",
    ]
)
_SUBJECT_NOISE = frozenset(
    [
        "the",
        "a",
        "an",
        "our",
        "your",
        "max",
        "maximum",
        "min",
        "minimum",
        "default",
        "target",
        "desired",
        "preferred",
        "current",
        "should",
        "must",
        "always",
    ]
)


@dataclass(frozen=True)
class Assertion:
    subject: str
    value: str
    line: int
    position: int

    @property
    def key(self) -> str:
        """What is compared: the number alone when the value is a quantity (units vary)."""
        number = re.match(r"\d+(?:\.\d+)?", self.value)
        return number.group(0) if number and "version" not in self.subject else self.value


def _sentences(instruction: ParsedInstruction):
    text = _CODE.sub(lambda m: m.group(0).strip("`"), instruction.text)
    for offset, line in enumerate(text.split("\n")):
        for sentence in re.split(r"(?<=[.;!?])\s+", line):
            if sentence.strip():
                yield instruction.line_start + offset, sentence


def _clean_subject(subject: str) -> str:
    words = [w for w in re.findall(r"[a-z][\w-]*", subject.lower()) if w not in _SUBJECT_NOISE]
    return " ".join(words[-2:])


def setting_assertions(parsed: ParsedFile) -> list[Assertion]:
    """(subject, value) pairs that instructions assert, by the documented patterns."""
    found: list[Assertion] = []
    for instruction in parsed.instructions:
        if instruction.kind == "code":
            continue
        for line, sentence in _sentences(instruction):
            negated = bool(_NEGATION.search(sentence))
            for match in _MEASURE.finditer(sentence):
                subject = (
                    "indentation"
                    if match["subject"].lower().startswith("indent")
                    else "line length"
                )
                unit = _singular(match["unit"]).replace("char", "character")
                if not unit.endswith("character") and "char" in unit:
                    unit = "character"
                found.append(
                    Assertion(subject, f"{match['value']} {unit}s", line, instruction.position)
                )
            for match in _SETTING.finditer(sentence):
                subject = _clean_subject(match["subject"])
                if subject and not negated and subject not in {"step", "rule", "version"}:
                    value = re.sub(r"\s+", " ", match["value"].strip().lower())
                    found.append(Assertion(subject, value, line, instruction.position))
            versions = list(_LANG_VERSION.finditer(sentence))
            if len(versions) == 1 and not negated:
                lang = (
                    versions[0]["lang"].lower().replace(".js", "").replace("postgresql", "postgres")
                )
                found.append(
                    Assertion(f"{lang} version", versions[0]["version"], line, instruction.position)
                )
            if negated or not _PRESCRIBE.search(sentence):
                continue
            lowered = sentence.lower()
            for family, tools in TOOL_FAMILIES.items():
                named = [
                    t for t in tools if re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", lowered)
                ]
                if len(named) == 1:
                    found.append(Assertion(family, named[0], line, instruction.position))
    return found


def _action_words(action: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9_/.-]+", action.lower()) if w not in _STOP)


def check_contradictions(parsed: ParsedFile) -> list[Finding]:
    findings = []
    by_subject: dict[str, list[Assertion]] = {}
    for assertion in setting_assertions(parsed):
        by_subject.setdefault(assertion.subject, []).append(assertion)
    for subject, assertions in by_subject.items():
        values = {a.key for a in assertions}
        positions = {a.position for a in assertions}
        if len(values) > 1 and len(positions) > 1:
            places = "; ".join(f"{a.value} (line {a.line})" for a in assertions)
            findings.append(
                Finding(
                    "contradictions", WARNING,
                    f"Instructions give different values for “{subject}”: {places}.",
                    line=assertions[0].line, position=assertions[0].position,
                    data={"subject": subject,
                          "values": [{"value": a.value, "line": a.line, "position": a.position}
                                     for a in assertions]},
                )
            )  # fmt: skip
    polar: list[tuple[bool, frozenset[str], int, int, str]] = []
    for instruction in parsed.instructions:
        for line, sentence in _sentences(instruction):
            match = _POLARITY.match(sentence)
            if not match:
                continue
            negative = match["modal"].lower() in {"never", "do not", "don't", "must not"}
            words = _action_words(match["action"])
            if len(words) >= 2:
                polar.append((negative, words, line, instruction.position, sentence.strip()))
    for index, (neg_a, words_a, line_a, pos_a, text_a) in enumerate(polar):
        for neg_b, words_b, line_b, pos_b, text_b in polar[index + 1 :]:
            if neg_a == neg_b or pos_a == pos_b:
                continue
            overlap = len(words_a & words_b) / len(words_a | words_b)
            if overlap >= 0.8:
                findings.append(
                    Finding(
                        "contradictions", WARNING,
                        f"Opposite instructions about the same action: “{text_a}” (line "
                        f"{line_a}) and “{text_b}” (line {line_b}).",
                        line=line_a, position=pos_a,
                        data={"lines": [line_a, line_b], "positions": [pos_a, pos_b]},
                    )
                )  # fmt: skip
    return findings


def check_duplicates(parsed: ParsedFile) -> list[Finding]:
    """Each instruction at least 90% similar to an earlier one is reported once, against the
    first it repeats. Only earlier non-duplicates are compared, lengths bound the ratio
    (2·min/(a+b)), and difflib's cheap upper bounds go before the full ratio."""
    min_share = DUPLICATE_SIMILARITY / (2 - DUPLICATE_SIMILARITY)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    originals: list[tuple[int, str, ParsedInstruction]] = []
    findings = []
    for instruction in parsed.instructions:
        text = instruction.normalised
        if len(text) < 12:
            continue
        matcher.set_seq2(text)
        repeated = None
        for length, other_text, other in originals:
            if min(length, len(text)) < min_share * max(length, len(text)):
                continue
            matcher.set_seq1(other_text)
            if (
                matcher.real_quick_ratio() >= DUPLICATE_SIMILARITY
                and matcher.quick_ratio() >= DUPLICATE_SIMILARITY
                and matcher.ratio() >= DUPLICATE_SIMILARITY
            ):
                repeated = (other, matcher.ratio())
                break
        if repeated is None:
            originals.append((len(text), text, instruction))
            continue
        first, ratio = repeated
        findings.append(
            Finding(
                "duplicates", WARNING,
                f"Instruction at line {instruction.line_start} repeats the one at line "
                f"{first.line_start} ({ratio:.0%} similar).",
                line=instruction.line_start, position=instruction.position,
                data={"first_position": first.position, "similarity": round(ratio, 3)},
            )
        )  # fmt: skip
    return findings


CHECKS = ("counts", "paths", "commands", "generated", "contradictions", "duplicates")
