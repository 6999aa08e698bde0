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
PAIRING_WINDOW = 25


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


def _similar_pairs(old_ids, new_ids, old_norm, new_norm, threshold: float):
    """(ratio, i, j) for pairs at least `threshold` similar.

    Candidates are compared only within `PAIRING_WINDOW` places of each other in the
    leftover stretches (all pairs when both are that short), and difflib's cheap upper
    bounds go before the full ratio, so a rewrite of a long file stays fast.
    """
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    scale = len(new_ids) / len(old_ids) if old_ids else 1.0
    for a, i in enumerate(old_ids):
        matcher.set_seq2(old_norm[i])
        centre = a * scale
        low = max(0, int(centre) - PAIRING_WINDOW)
        for j in new_ids[low : int(centre) + PAIRING_WINDOW + 1]:
            matcher.set_seq1(new_norm[j])
            if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
                continue
            ratio = matcher.ratio()
            if ratio >= threshold:
                yield ratio, i, j


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
    aligned: list[tuple[float, int, int]] = []
    pair_matcher = difflib.SequenceMatcher(None, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                matched_new[j] = InstructionChange(ChangeKind.UNCHANGED, i, j, 1.0)
            continue
        # An edited stretch: first try the instruction in the same place.
        for k in range(min(i2 - i1, j2 - j1)):
            pair_matcher.set_seqs(old_norm[i1 + k], new_norm[j1 + k])
            if old_norm[i1 + k] != new_norm[j1 + k] and pair_matcher.ratio() >= threshold:
                aligned.append((pair_matcher.ratio(), i1 + k, j1 + k))
        paired_old = {i for _, i, _ in aligned}
        paired_new = {j for _, _, j in aligned}
        removed.extend(i for i in range(i1, i2) if i not in paired_old)
        added.extend(j for j in range(j1, j2) if j not in paired_new)

    # Identical text elsewhere in the file: the instruction moved.
    by_text: dict[str, list[int]] = {}
    for i in removed:
        by_text.setdefault(old_norm[i], []).append(i)
    moved_old: set[int] = set()
    for j in list(added):
        candidates = by_text.get(new_norm[j])
        if candidates:
            i = candidates.pop(0)
            moved_old.add(i)
            matched_new[j] = InstructionChange(ChangeKind.MOVED, i, j, 1.0)
    removed = [i for i in removed if i not in moved_old]
    added = [j for j in added if j not in matched_new]

    scored = aligned + sorted(
        _similar_pairs(removed, added, old_norm, new_norm, threshold),
        key=lambda item: (-item[0], abs(item[1] - item[2]), item[1]),
    )
    used_old: set[int] = set()
    used_new: set[int] = set()
    for ratio, i, j in scored:
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
    latest_new = -1
    unmatched_old = set(removed) - used_old
    for i in range(len(old)):
        if i in old_to_new:
            latest_new = max(latest_new, old_to_new[i])
        elif i in unmatched_old:
            changes.append((latest_new + 0.5, InstructionChange(ChangeKind.REMOVED, i, None, 0.0)))
    changes.sort(key=lambda item: item[0])
    return DiffSummary([change for _, change in changes])
