"""check_duplicates: instructions that say nearly the same thing twice."""

from __future__ import annotations

import difflib

from qualification.contextfiles.analysis.drift.findings import (
    DUPLICATE_SIMILARITY,
    WARNING,
    Finding,
)
from qualification.contextfiles.analysis.parsing import (
    ParsedFile,
    ParsedInstruction,
)


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
