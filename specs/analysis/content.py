"""Spec items as plain data: normalisation, validation, the canonical form and its fingerprint.

The fingerprint is the sha256 of the canonical JSON of a version's items. Items are ordered
by kind (the order of `KINDS`, which is also the order of the Markdown sections) and keep
their order within a kind, so the fingerprint survives a Markdown export and import.
No Django imports.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CANONICAL_FORMAT = "context-governance/spec-items@1"

KINDS: tuple[str, ...] = (
    "requirement",
    "constraint",
    "definition",
    "interface",
    "decision",
    "open_question",
)
KIND_LABELS = {
    "requirement": "Requirement",
    "constraint": "Constraint",
    "definition": "Definition",
    "interface": "Interface",
    "decision": "Decision",
    "open_question": "Open question",
}
KIND_HEADINGS = {
    "requirement": "Requirements",
    "constraint": "Constraints",
    "definition": "Definitions",
    "interface": "Interfaces",
    "decision": "Decisions",
    "open_question": "Open questions",
}
SETTLED = "settled"
UNRESOLVED = "unresolved"
STATUSES: tuple[str, ...] = (SETTLED, UNRESOLVED)

KEY_MAX_LENGTH = 80
KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
KEY_HELP = (
    "Letters, digits and . _ : - (starting with a letter or digit), "
    f"at most {KEY_MAX_LENGTH} characters."
)
MAX_ITEMS = 2000
MAX_ALTERNATIVES = 50
MAX_TEXT_LENGTH = 20_000

# Characters Python treats as line breaks besides "\n"; normalised to "\n" so that every
# reader splits lines the same way.
_LINE_BREAKS = re.compile(r"\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f]")
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class Alternative:
    text: str
    evidence: str = ""

    def as_dict(self) -> dict:
        return {"text": self.text, "evidence": self.evidence}


@dataclass(frozen=True)
class Item:
    key: str
    kind: str
    text: str
    rationale: str = ""
    status: str = SETTLED
    alternatives: tuple[Alternative, ...] = ()

    @property
    def is_unresolved(self) -> bool:
        return self.status == UNRESOLVED

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "kind": self.kind,
            "text": self.text,
            "rationale": self.rationale,
            "status": self.status,
            "alternatives": [alternative.as_dict() for alternative in self.alternatives],
        }

    @classmethod
    def from_dict(cls, data: dict) -> Item:
        return cls(
            key=data.get("key", ""),
            kind=data.get("kind", ""),
            text=data.get("text", ""),
            rationale=data.get("rationale", "") or "",
            status=data.get("status") or SETTLED,
            alternatives=tuple(
                Alternative(text=a.get("text", ""), evidence=a.get("evidence", "") or "")
                for a in data.get("alternatives") or ()
            ),
        )


@dataclass(frozen=True)
class Problem:
    """One validation failure: which item (by index), which field, and why."""

    index: int | None
    field: str
    message: str
    alternative: int | None = None
    duplicate_of: int | None = None


@dataclass(frozen=True)
class ItemsCheck:
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems


def normalize_text(value: str | None) -> str:
    """The stored form of any text: NFC, "\\n" line breaks, no trailing spaces or blank runs."""
    if not value:
        return ""
    text = unicodedata.normalize("NFC", str(value))
    text = _LINE_BREAKS.sub("\n", text)
    text = _CONTROL.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip()


def normalize_item(item: Item) -> Item:
    return Item(
        key=(item.key or "").strip(),
        kind=(item.kind or "").strip(),
        text=normalize_text(item.text),
        rationale=normalize_text(item.rationale),
        status=(item.status or SETTLED).strip(),
        alternatives=tuple(
            Alternative(text=normalize_text(a.text), evidence=normalize_text(a.evidence))
            for a in item.alternatives
        ),
    )


def canonical_items(items: Iterable[Item]) -> list[Item]:
    """Normalised items grouped by kind in `KINDS` order, keeping their order within a kind."""
    normalized = [normalize_item(item) for item in items]
    rank = {kind: position for position, kind in enumerate(KINDS)}
    return sorted(normalized, key=lambda item: rank.get(item.kind, len(KINDS)))


def canonical_json(items: Iterable[Item]) -> bytes:
    payload = {
        "format": CANONICAL_FORMAT,
        "items": [item.as_dict() for item in canonical_items(items)],
    }
    return json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def fingerprint(items: Iterable[Item]) -> str:
    """sha256 (hex) of the canonical items: the identity of a version's content."""
    return hashlib.sha256(canonical_json(items)).hexdigest()


def is_valid_key(key: str) -> bool:
    return bool(key) and len(key) <= KEY_MAX_LENGTH and KEY_PATTERN.fullmatch(key) is not None


def check_items(items: Sequence[Item], *, for_submission: bool = False) -> ItemsCheck:
    """Every problem with a list of (normalised) items; `for_submission` adds the stricter rules.

    A draft may be work in progress; a submitted version must be complete: at least one
    item, every unresolved open question lists an alternative, and every alternative of an
    unresolved item carries its evidence.
    """
    problems: list[Problem] = []
    if len(items) > MAX_ITEMS:
        problems.append(Problem(None, "items", f"At most {MAX_ITEMS} items per version."))
    if for_submission and not items:
        problems.append(Problem(None, "items", "A version needs at least one item."))
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if not item.key:
            problems.append(Problem(index, "key", "Give the item a key."))
        elif not is_valid_key(item.key):
            problems.append(Problem(index, "key", f"'{item.key}' is not a valid key: {KEY_HELP}"))
        else:
            folded = item.key.casefold()
            if folded in seen:
                problems.append(
                    Problem(
                        index,
                        "key",
                        f"Key '{item.key}' is already used by item {seen[folded] + 1}; "
                        "keys are unique within a version (ignoring case).",
                        duplicate_of=seen[folded],
                    )
                )
            else:
                seen[folded] = index
        if item.kind not in KINDS:
            problems.append(
                Problem(
                    index, "kind", f"'{item.kind}' is not a kind; use one of {', '.join(KINDS)}."
                )
            )
        if item.status not in STATUSES:
            problems.append(
                Problem(
                    index, "status", f"'{item.status}' is not a status; use settled or unresolved."
                )
            )
        if not item.text:
            problems.append(Problem(index, "text", "The item needs text."))
        for name in ("text", "rationale"):
            if len(getattr(item, name)) > MAX_TEXT_LENGTH:
                problems.append(Problem(index, name, f"At most {MAX_TEXT_LENGTH:,} characters."))
        if len(item.alternatives) > MAX_ALTERNATIVES:
            problems.append(
                Problem(index, "alternatives", f"At most {MAX_ALTERNATIVES} alternatives per item.")
            )
        if (
            for_submission
            and item.is_unresolved
            and item.kind == "open_question"
            and not item.alternatives
        ):
            problems.append(
                Problem(
                    index,
                    "alternatives",
                    f"Open question '{item.key}' needs at least one alternative, with its "
                    "evidence, before the version is submitted.",
                )
            )
        for position, alternative in enumerate(item.alternatives):
            if not alternative.text:
                problems.append(
                    Problem(index, "text", "Describe the alternative.", alternative=position)
                )
            if for_submission and item.is_unresolved and not alternative.evidence:
                problems.append(
                    Problem(
                        index,
                        "evidence",
                        f"Alternative {position + 1} of '{item.key}' needs its evidence before "
                        "the version is submitted (an open question lists each alternative "
                        "with the evidence for it).",
                        alternative=position,
                    )
                )
    return ItemsCheck(tuple(problems))


_STOPWORDS_TEXT = """a an and are as at be been being by can could do does for from has have how if in
    into is it its must may might of on or our shall should so than that the their then
    there these this those to was we were what when where which while who will with would
    you your all any each every not no only also use used using"""
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
# Letters NFKD does not decompose into ASCII.
_TRANSLITERATE = str.maketrans(
    {"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE", "đ": "d",
     "ł": "l", "Ł": "L", "þ": "th", "ð": "d"}
)  # fmt: skip


def suggest_key(text: str, taken: Iterable[str] = (), *, max_words: int = 4) -> str:
    """A short, readable key from an item's text, unique against `taken` (ignoring case)."""
    folded = unicodedata.normalize("NFKD", (text or "").translate(_TRANSLITERATE))
    folded = folded.encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", folded.lower())
    meaningful = [word for word in words if word not in _STOPWORDS] or words
    base = "-".join(meaningful[:max_words])[:40].strip("-") or "item"
    taken_folded = {key.casefold() for key in taken}
    candidate, suffix = base, 2
    while candidate.casefold() in taken_folded:
        candidate = f"{base}-{suffix}"
        suffix += 1
    return candidate
