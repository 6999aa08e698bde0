"""check_counts: numbers the file claims ("12 packages") against the listing."""

from __future__ import annotations

import re
from dataclasses import dataclass

from qualification.contextfiles.analysis.drift.findings import (
    _CODE,
    ERROR,
    WARNING,
    Finding,
    _singular,
)
from qualification.contextfiles.analysis.parsing import (
    SECTION_SEPARATOR,
    ParsedFile,
)
from qualification.contextfiles.formats.listing import Listing

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


@dataclass(frozen=True)
class CountClaim:
    number: int
    noun: str
    line: int
    position: int | None
    text: str


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
