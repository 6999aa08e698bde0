"""The key-by-key comparison of two versions' items, with a word-level diff of changed text.

Every key lands in exactly one category:

* ``added``             only in the newer version;
* ``omitted``           only in the older version, and was settled there;
* ``resolved``          unresolved in the older version and settled in the newer one, or
                        removed from it (a question must not disappear silently);
* ``marked_unresolved`` settled in the older version, unresolved in the newer one;
* ``changed``           in both, same status, different kind, text, rationale or alternatives;
* ``retained``          in both and identical.

No Django imports.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from specs.analysis.content import Item, canonical_items

CATEGORIES: tuple[str, ...] = (
    "resolved",
    "marked_unresolved",
    "changed",
    "added",
    "omitted",
    "retained",
)
COMPARED_FIELDS: tuple[str, ...] = ("kind", "status", "text", "rationale", "alternatives")

_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class WordOp:
    op: str  # "equal", "delete" (only before) or "insert" (only after)
    text: str


@dataclass(frozen=True)
class ItemDiff:
    key: str
    category: str
    before: Item | None
    after: Item | None
    fields: tuple[str, ...] = ()

    @property
    def removed(self) -> bool:
        return self.after is None

    @property
    def text_ops(self) -> tuple[WordOp, ...]:
        return word_diff(
            self.before.text if self.before else "", self.after.text if self.after else ""
        )

    @property
    def rationale_ops(self) -> tuple[WordOp, ...]:
        return word_diff(
            self.before.rationale if self.before else "", self.after.rationale if self.after else ""
        )


@dataclass(frozen=True)
class VersionDiff:
    entries: tuple[ItemDiff, ...]

    def keys(self, category: str) -> list[str]:
        return [entry.key for entry in self.entries if entry.category == category]

    def of(self, category: str) -> list[ItemDiff]:
        return [entry for entry in self.entries if entry.category == category]

    @property
    def counts(self) -> dict[str, int]:
        return {category: len(self.keys(category)) for category in CATEGORIES}

    @property
    def has_changes(self) -> bool:
        return any(entry.category != "retained" for entry in self.entries)

    def as_summary(self) -> dict:
        """The API shape: lists of keys per category; `changed` holds before and after."""
        summary: dict = {category: self.keys(category) for category in CATEGORIES}
        summary["changed"] = [
            {
                "key": e.key,
                "before": e.before.as_dict(),
                "after": e.after.as_dict(),
                "fields": list(e.fields),
            }
            for e in self.of("changed")
        ]
        return summary


def diff_items(before: Sequence[Item], after: Sequence[Item]) -> VersionDiff:
    """Compare two item lists key by key. Entries follow the newer order, then removed keys."""
    old = {item.key: item for item in canonical_items(before)}
    new_items = canonical_items(after)
    new = {item.key: item for item in new_items}
    entries: list[ItemDiff] = []
    for item in new_items:
        previous = old.get(item.key)
        if previous is None:
            entries.append(ItemDiff(item.key, "added", None, item))
            continue
        fields = tuple(
            name for name in COMPARED_FIELDS if getattr(previous, name) != getattr(item, name)
        )
        if previous.is_unresolved and not item.is_unresolved:
            category = "resolved"
        elif not previous.is_unresolved and item.is_unresolved:
            category = "marked_unresolved"
        elif fields:
            category = "changed"
        else:
            category = "retained"
        entries.append(ItemDiff(item.key, category, previous, item, fields))
    for key, previous in old.items():
        if key not in new:
            category = "resolved" if previous.is_unresolved else "omitted"
            entries.append(ItemDiff(key, category, previous, None))
    return VersionDiff(tuple(entries))


def resolved_keys(before: Sequence[Item], after: Sequence[Item]) -> list[str]:
    """Keys of open questions the newer version settles or removes."""
    return diff_items(before, after).keys("resolved")


ACKNOWLEDGED_CATEGORIES = ("resolved", "omitted")


def acknowledgement_keys(before: Sequence[Item], after: Sequence[Item]) -> dict[str, list[str]]:
    """What a decision must acknowledge by key: open questions resolved (settled or removed)
    and settled items omitted. Neither may change a spec silently."""
    diff = diff_items(before, after)
    return {category: diff.keys(category) for category in ACKNOWLEDGED_CATEGORIES}


def word_diff(before: str, after: str) -> tuple[WordOp, ...]:
    """Word-level edit script (difflib) between two texts; whitespace runs count as tokens."""
    a, b = _WORDS.findall(before or ""), _WORDS.findall(after or "")
    ops: list[WordOp] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            _append(ops, "equal", "".join(a[i1:i2]))
            continue
        if tag in ("delete", "replace"):
            _append(ops, "delete", "".join(a[i1:i2]))
        if tag in ("insert", "replace"):
            _append(ops, "insert", "".join(b[j1:j2]))
    return tuple(ops)


def _append(ops: list[WordOp], op: str, text: str) -> None:
    if not text:
        return
    if ops and ops[-1].op == op:
        ops[-1] = WordOp(op, ops[-1].text + text)
    else:
        ops.append(WordOp(op, text))
