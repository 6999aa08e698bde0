"""check_contradictions: instructions that prescribe and forbid the same tool or setting."""

from __future__ import annotations

import re
from dataclasses import dataclass

from qualification.contextfiles.analysis.drift.findings import (
    _CODE,
    WARNING,
    Finding,
    _singular,
)
from qualification.contextfiles.analysis.parsing import (
    ParsedFile,
    ParsedInstruction,
)

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
