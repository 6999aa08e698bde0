"""Which portions of an artifact were loaded: merged byte ranges from the read log."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Coverage:
    size: int
    ranges: list[tuple[int, int]]

    @property
    def loaded_bytes(self) -> int:
        return sum(end - start for start, end in self.ranges)

    @property
    def fraction(self) -> float:
        return self.loaded_bytes / self.size if self.size else 0.0

    def segments(self) -> list[dict]:
        """Ranges as percentages of the artifact, for drawing a bar."""
        if not self.size:
            return []
        return [
            {
                "start": start,
                "end": end,
                "left": round(100 * start / self.size, 3),
                "width": max(round(100 * (end - start) / self.size, 3), 0.2),
            }
            for start, end in self.ranges
        ]


def merge_ranges(ranges: Iterable[tuple[int, int]], *, size: int) -> Coverage:
    """Union of half-open byte ranges, clipped to [0, size)."""
    clipped = sorted(
        (max(0, start), min(size, end)) for start, end in ranges if min(size, end) > max(0, start)
    )
    merged: list[tuple[int, int]] = []
    for start, end in clipped:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return Coverage(size=size, ranges=merged)
