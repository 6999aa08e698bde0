"""Instruction-level diff between two revisions of a context file (difflib). Pure.

Instructions are compared by their normalised text. Identical instructions are
`unchanged` (or `moved` when their order changed); of the rest, pairs whose similarity is
at least `CHANGED_THRESHOLD` are `changed` (best pairs first); the remainder are `added`
or `removed`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from qualification.contextfiles.analysis.parsing import normalise

CHANGED_THRESHOLD = 0.6


class ChangeKind(StrEnum):
    UNCHANGED = "unchanged"
    MOVED = "moved"
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"


@dataclass(frozen=True)
class Segment:
    op: str  # equal, insert, delete
    text: str


@dataclass(frozen=True)
class InstructionChange:
    kind: ChangeKind
    old_index: int | None
    new_index: int | None
    similarity: float
    segments: list[Segment] = field(default_factory=list)


@dataclass(frozen=True)
class DiffSummary:
    changes: list[InstructionChange]

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    @property
    def counts(self) -> dict[str, int]:
        return {kind.value: self.count(kind) for kind in ChangeKind}

    @property
    def edits(self) -> list[InstructionChange]:
        return [c for c in self.changes if c.kind not in (ChangeKind.UNCHANGED,)]


def word_diff(old: str, new: str) -> list[Segment]:
    """Word-level segments for showing a changed instruction with <del>/<ins>."""
    a = re.findall(r"\s+|\w+|[^\w\s]+", old)
    b = re.findall(r"\s+|\w+|[^\w\s]+", new)
    segments: list[Segment] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            segments.append(Segment("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            segments.append(Segment("delete", "".join(a[i1:i2])))
        if j2 > j1:
            segments.append(Segment("insert", "".join(b[j1:j2])))
    return segments


def similarity(old: str, new: str) -> float:
    return difflib.SequenceMatcher(None, normalise(old), normalise(new), autojunk=False).ratio()


def diff_instructions(
    old: Sequence[str], new: Sequence[str], *, threshold: float = CHANGED_THRESHOLD
) -> DiffSummary:
    """Changes from `old` to `new` (instruction texts in file order), in new-file order."""
    old_norm = [normalise(t) for t in old]
    new_norm = [normalise(t) for t in new]
    matcher = difflib.SequenceMatcher(None, old_norm, new_norm, autojunk=False)
    matched_new: dict[int, InstructionChange] = {}
    removed: list[int] = []
    added: list[int] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                matched_new[j] = InstructionChange(ChangeKind.UNCHANGED, i, j, 1.0)
        else:
            removed.extend(range(i1, i2))
            added.extend(range(j1, j2))

    # Identical text elsewhere in the file: the instruction moved.
    by_text: dict[str, list[int]] = {}
    for i in removed:
        by_text.setdefault(old_norm[i], []).append(i)
    for j in list(added):
        candidates = by_text.get(new_norm[j])
        if candidates:
            i = candidates.pop(0)
            removed.remove(i)
            added.remove(j)
            matched_new[j] = InstructionChange(ChangeKind.MOVED, i, j, 1.0)

    scored = sorted(
        (
            (difflib.SequenceMatcher(None, old_norm[i], new_norm[j], autojunk=False).ratio(), i, j)
            for i in removed
            for j in added
        ),
        key=lambda item: (-item[0], abs(item[1] - item[2]), item[1]),
    )
    used_old: set[int] = set()
    used_new: set[int] = set()
    for ratio, i, j in scored:
        if ratio < threshold:
            break
        if i in used_old or j in used_new:
            continue
        used_old.add(i)
        used_new.add(j)
        matched_new[j] = InstructionChange(
            ChangeKind.CHANGED, i, j, round(ratio, 3), word_diff(old[i], new[j])
        )

    changes: list[tuple[float, InstructionChange]] = []
    old_to_new = {c.old_index: j for j, c in matched_new.items()}
    for j in range(len(new)):
        change = matched_new.get(j) or InstructionChange(ChangeKind.ADDED, None, j, 0.0)
        changes.append((float(j), change))
    for i in removed:
        if i in used_old:
            continue
        preceding = [old_to_new[k] for k in range(i) if k in old_to_new]
        anchor = (max(preceding) if preceding else -1) + 0.5
        changes.append((anchor, InstructionChange(ChangeKind.REMOVED, i, None, 0.0)))
    changes.sort(key=lambda item: item[0])
    return DiffSummary([change for _, change in changes])
