"""The survival audit: which settled spec items a compaction summary kept.

Deterministic and documented in docs/specs.md ("Survival audit"). For each item:

1. **Verbatim facts.** Every number (``115000``, ``3.5``, ``90%``, ``128k``; thousands
   separators ``115,000`` are read as ``115000``) and every identifier (a backtick span, or a
   word with ``_``, ``/``, ``::``, an inner ``.``, camelCase, letters mixed with digits, or a
   leading ``--``: ``MAX_RETRIES``, ``src/app.py``, ``settings.json``, ``gpt-4o``) in the item's
   text must appear verbatim in the summary. One missing fact loses the item, whatever else
   the summary says, and the reason names it ("number 115000 missing").
2. **Key or words.** Otherwise the item is kept when the summary names its key (case-insensitive,
   as a whole word), or when at least ``THRESHOLD`` of the item's content words are words of
   the summary. Words are NFKC-normalised, casefolded runs of letters and digits, with a
   plural ``s`` dropped from words longer than three letters; stop words do not count. The
   normalised item text found whole in the normalised summary scores 1.

Plain data in, dataclasses out; no Django.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

METHOD = "survival@1"
THRESHOLD = 0.6

STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "must",
        "of",
        "on",
        "or",
        "shall",
        "should",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "were",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
    }
)  # fmt: skip
_ABBREVIATIONS = frozenset({"e.g", "i.e", "a.k.a", "etc", "vs", "cf"})

_NUMBER = re.compile(r"(?<![\w.])(?<!\w-)\d+(?:[.,\-]\d+)*[A-Za-z%]*(?![\w])")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+(?=\D|$)")
_BACKTICK = re.compile(r"`([^`\n]+)`")
_IDENT_CHARS = r"A-Za-z0-9_"
_IDENTIFIER = re.compile(
    rf"(?<![{_IDENT_CHARS}./\-])(?:--|~/|\./|/|\.)?[{_IDENT_CHARS}][{_IDENT_CHARS}./:\-]*[{_IDENT_CHARS}]"
    rf"|(?<![{_IDENT_CHARS}./\-])--[{_IDENT_CHARS}]"
)
_CAMEL = re.compile(r"[a-z][A-Z]")
_NUMBERISH = re.compile(r"[\d.,\-]+[A-Za-z%]*")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class AuditItem:
    key: str
    text: str


@dataclass(frozen=True)
class Verdict:
    key: str
    kept: bool
    score: float
    reason: str
    key_found: bool = False
    missing: tuple[str, ...] = ()
    facts: tuple[str, ...] = field(default=())


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "")


def _number(raw: str) -> str:
    head = _THOUSANDS.match(raw)
    if head:
        raw = head.group(0).replace(",", "") + raw[head.end() :]
    digits = re.match(r"[\d.,\-]*\d", raw)
    suffix = raw[digits.end() :] if digits else ""
    return (digits.group(0) if digits else raw) + suffix.lower()


def numbers(text: str) -> list[str]:
    """Numbers in `text`, in order, once each, thousands separators removed."""
    seen: dict[str, None] = {}
    for match in _NUMBER.finditer(_nfkc(text)):
        seen.setdefault(_number(match.group(0)), None)
    return list(seen)


def _is_identifier(token: str) -> bool:
    if token.lower() in _ABBREVIATIONS:
        return False
    if _NUMBERISH.fullmatch(token):
        return False  # a number
    if token.startswith("--") or "_" in token or "/" in token or "::" in token:
        return True
    if "." in token.strip("."):
        return True
    if _CAMEL.search(token):
        return True
    letters, digits = any(c.isalpha() for c in token), any(c.isdigit() for c in token)
    return letters and digits


def identifiers(text: str) -> list[str]:
    """Identifiers in `text` that must appear verbatim: backtick spans and code-like words."""
    text = _nfkc(text)
    seen: dict[str, None] = {}
    for match in _BACKTICK.finditer(text):
        span = match.group(1).strip()
        if span and not _NUMBERISH.fullmatch(span):
            seen.setdefault(span, None)
    for match in _IDENTIFIER.finditer(_BACKTICK.sub(" ", text)):
        token = match.group(0).rstrip(".:-")
        if _is_identifier(token):
            seen.setdefault(token, None)
    return list(seen)


def _word_char(c: str) -> bool:
    return c == "_" or (c.isascii() and c.isalnum())


def _bounded(haystack: str, needle: str) -> bool:
    """`needle` in `haystack` with no letter, digit or `_` right before or after it."""
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        before = haystack[start - 1] if start else ""
        after = haystack[end] if end < len(haystack) else ""
        if not (before and _word_char(before)) and not (after and _word_char(after)):
            return True
        start = haystack.find(needle, start + 1)
    return False


def _has_identifier(summary: str, token: str) -> bool:
    return _bounded(summary, token)


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Normalised words: casefolded letter-and-digit runs, plural `s` dropped."""
    return [_stem(w) for w in _WORD.findall(_nfkc(text).casefold())]


def content_words(text: str) -> list[str]:
    """Distinct words of `text` that count for the overlap (stop words left out)."""
    return list(dict.fromkeys(w for w in words(text) if w not in STOP_WORDS))


def _key_found(summary_folded: str, key: str) -> bool:
    key = _nfkc(key).casefold().strip()
    return bool(key) and _bounded(summary_folded, key)


def _share(found: int, total: int) -> str:
    return f"{round(100 * found / total)}%"


@dataclass(frozen=True)
class _Summary:
    raw: str
    folded: str
    numbers: frozenset[str]
    words: frozenset[str]
    normalised: str


def _prepare(summary: str) -> _Summary:
    raw = _nfkc(summary)
    summary_words = words(raw)
    return _Summary(
        raw=raw,
        folded=raw.casefold(),
        numbers=frozenset(numbers(raw)),
        words=frozenset(summary_words),
        normalised=" " + " ".join(summary_words) + " ",
    )


def judge(item: AuditItem, summary: _Summary, threshold: float = THRESHOLD) -> Verdict:
    nums = numbers(item.text)
    idents = identifiers(item.text)
    missing = [f"number {n}" for n in nums if n not in summary.numbers]
    missing += [f"identifier {i}" for i in idents if not _has_identifier(summary.raw, i)]
    key_found = _key_found(summary.folded, item.key)
    wanted = content_words(item.text)
    found = sum(1 for w in wanted if w in summary.words)
    item_words = words(item.text)
    whole = bool(item_words) and f" {' '.join(item_words)} " in summary.normalised
    score = 1.0 if whole or not wanted else found / len(wanted)
    words_text = (
        "the whole text found"
        if whole
        else f"{found} of {len(wanted)} words found ({_share(found, len(wanted))})"
        if wanted
        else "no words to compare"
    )
    facts = tuple(nums) + tuple(idents)
    if missing:
        reason = ", ".join(missing) + " missing"
        return Verdict(item.key, False, score, reason, key_found, tuple(missing), facts)
    fact_text = (
        f"; {len(facts)} verbatim fact{'' if len(facts) == 1 else 's'} present" if facts else ""
    )
    if key_found:
        return Verdict(item.key, True, score, f"key {item.key} named{fact_text}", True, (), facts)
    threshold_text = f"{_share(threshold, 1)}"
    if score >= threshold:
        reason = f"{words_text}, at least {threshold_text}{fact_text}"
        return Verdict(item.key, True, score, reason, False, (), facts)
    reason = f"{words_text}, below {threshold_text}"
    return Verdict(item.key, False, score, reason, False, (), facts)


def audit(items: Iterable[AuditItem], summary: str, threshold: float = THRESHOLD) -> list[Verdict]:
    """One verdict per item, in the items' order."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    prepared = _prepare(summary)
    return [judge(item, prepared, threshold) for item in items]
