"""Instruction visibility (seed 000): how often an instruction that is inside the window
appears in the model's visible thinking, by session and by turns since it was delivered.
Pure: plain data in, plain dicts out; no Django.

Definitions (docs/analytics.md, "Instruction visibility"):

- A *call* is one model call of one agent (one context window lineage); its *order* is its
  position among that agent's calls, and *turns since delivery* is order − delivered_at.
- A call counts only once the instruction is in its window (order ≥ delivered_at) and only
  when it has visible thinking: at least one thinking block with non-blank text. n is the
  number of such calls; calls in the window without visible thinking are reported beside n.
- A call's thinking is its thinking blocks' texts joined in order with a newline.
- **Exact match:** the instruction, stripped of leading and trailing whitespace, occurs
  character for character in that text.
- **Normalised match:** both texts go through `normalise` (markdown links reduced to their
  text, casefolded, every punctuation, symbol or markdown character replaced by a space,
  runs of whitespace collapsed to one space, ends stripped), then substring.
- Each share comes with a 95% Wilson interval (statsmodels), calls taken as independent.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

ALPHA = 0.05
METHOD = "95% Wilson interval over calls with visible thinking (calls taken as independent)"
# Bins of turns since delivery, inclusive; None: no upper end.
TURN_BINS: tuple[tuple[int, int | None], ...] = (
    (0, 0), (1, 4), (5, 9), (10, 19), (20, 49), (50, 99), (100, None),
)  # fmt: skip
MAX_INSTRUCTION_CHARS = 2000

_LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_SPACES = re.compile(r"\s+")


def without_list_marker(text: str) -> str:
    """A context-file instruction as it would be quoted: its leading list marker ("- ",
    "* ", "1. ", a task box) removed; the rest of its markdown source kept."""
    return _LIST_MARKER.sub("", text, count=1).strip()


@functools.cache
def _to_space() -> dict[int, str]:
    """Every punctuation (P*) and symbol (S*) code point, mapped to a space."""
    return {cp: " " for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp))[0] in "PS"}


def _unlinked(text: str) -> str:
    return (_LINK.sub(r"\1", text) if "](" in text else text).casefold()


def normalise(text: str) -> str:
    """Markdown links to their text; casefold; punctuation, symbols and markdown marks
    (``* _ ` # > ~ |``: all Unicode P* and S* categories) to spaces; whitespace collapsed."""
    return _SPACES.sub(" ", _unlinked(text).translate(_to_space())).strip()


class Matcher:
    """Exact and normalised containment of one instruction."""

    def __init__(self, instruction: str):
        self.exact_text = instruction.strip()
        self.normalised_text = normalise(instruction)
        # Normalising keeps runs of letters and digits intact, so a text whose casefold
        # lacks the instruction's longest word cannot match: skip normalising it.
        self._longest_word = max(self.normalised_text.split(" "), key=len, default="")

    @property
    def usable(self) -> bool:
        return bool(self.exact_text) and bool(self.normalised_text)

    def exact(self, text: str) -> bool:
        return bool(self.exact_text) and self.exact_text in text

    def normalised(self, text: str) -> bool:
        if not self.normalised_text:
            return False
        unlinked = _unlinked(text)
        if self._longest_word not in unlinked:
            return False
        return self.normalised_text in _SPACES.sub(" ", unlinked.translate(_to_space()))

    def in_window(self, texts: Iterable[str]) -> bool:
        """Whether any of these texts (a prompt, a summary, tool results) delivers it:
        normalised match, the looser of the two."""
        return any(self.normalised(t) for t in texts if t)


@dataclass(frozen=True)
class CallThinking:
    """One call as this analysis sees it."""

    session: int | str
    agent: int | str
    order: int
    # The agent's order at which it entered the window; None: not (yet) delivered.
    delivered_at: int | None
    thinking: tuple[str, ...] = ()


def wilson(count: int, n: int) -> dict:
    if n == 0:
        return {"count": 0, "n": 0, "rate": None, "ci": None}
    low, high = proportion_confint(count, n, alpha=ALPHA, method="wilson")
    return {"count": count, "n": n, "rate": count / n, "ci": [float(low), float(high)]}


def turn_bin(turns: int) -> int:
    for index, (low, high) in enumerate(TURN_BINS):
        if turns >= low and (high is None or turns <= high):
            return index
    raise ValueError(f"turns since delivery must be ≥ 0, got {turns}")


def bin_label(low: int, high: int | None) -> str:
    if high is None:
        return f"{low}+"
    return str(low) if low == high else f"{low}–{high}"


class _Tally:
    __slots__ = ("blocks", "exact", "n", "no_thinking", "normalised")

    def __init__(self):
        self.n = self.exact = self.normalised = self.no_thinking = self.blocks = 0

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "calls_without_thinking": self.no_thinking,
            "thinking_blocks": self.blocks,
            "exact": wilson(self.exact, self.n),
            "normalised": wilson(self.normalised, self.n),
        }


@dataclass(frozen=True)
class CallMatch:
    """One call once matched: its visible thinking blocks (0: none) and whether their
    joined text holds the instruction, exactly and normalised. Readers that match in the
    database (docs/analytics.md) build these without reading every call's text."""

    session: int | str
    agent: int | str
    order: int
    delivered_at: int | None
    blocks: int = 0
    exact: bool = False
    normalised: bool = False


def visible_thinking(thinking: Iterable[str]) -> tuple[str, ...]:
    """The thinking texts that count: the non-blank ones, in order."""
    return tuple(t for t in thinking if t and t.strip())


def _matched(matcher: Matcher, calls: Iterable[CallThinking]) -> Iterable[CallMatch]:
    for call in calls:
        texts = visible_thinking(call.thinking)
        joined = "\n".join(texts)
        yield CallMatch(
            call.session,
            call.agent,
            call.order,
            call.delivered_at,
            len(texts),
            bool(texts) and matcher.exact(joined),
            bool(texts) and matcher.normalised(joined),
        )


def instruction_visibility(instruction: str, calls: Iterable[CallThinking]) -> dict:
    """Count the calls in whose visible thinking the instruction appears, overall, by
    session and by bin of turns since delivery. `calls` may be a generator: nothing but
    counts is kept."""
    matcher = Matcher(instruction)
    if not matcher.usable:
        raise ValueError("The instruction has no letters or digits to match.")
    return visibility_from_matches(matcher, _matched(matcher, calls))


def visibility_from_matches(matcher: Matcher, calls: Iterable[CallMatch]) -> dict:
    """The counts of `instruction_visibility` from calls already matched."""
    overall = _Tally()
    by_session: dict[int | str, _Tally] = {}
    by_bin = [_Tally() for _ in TURN_BINS]
    outside = 0
    agents: set = set()
    sessions_seen: set = set()
    for call in calls:
        sessions_seen.add(call.session)
        if call.delivered_at is None or call.order < call.delivered_at:
            outside += 1
            continue
        agents.add((call.session, call.agent))
        session = by_session.setdefault(call.session, _Tally())
        bucket = by_bin[turn_bin(call.order - call.delivered_at)]
        tallies = (overall, session, bucket)
        if not call.blocks:
            for tally in tallies:
                tally.no_thinking += 1
            continue
        for tally in tallies:
            tally.n += 1
            tally.blocks += call.blocks
            tally.exact += call.exact
            tally.normalised += call.normalised
    return {
        "instruction": matcher.exact_text,
        "normalised_instruction": matcher.normalised_text,
        "method": METHOD,
        "overall": overall.as_dict(),
        "calls_outside_window": outside,
        "sessions": len(sessions_seen),
        "sessions_delivered": len(by_session),
        "agents_delivered": len(agents),
        "by_session": [{"session": key, **tally.as_dict()} for key, tally in by_session.items()],
        "by_turns": [
            {"turns": [low, high], "label": bin_label(low, high), **tally.as_dict()}
            for (low, high), tally in zip(TURN_BINS, by_bin, strict=True)
        ],
    }


def _tally_of(n: int, no_thinking: int, blocks: int, exact: int, normalised: int) -> _Tally:
    tally = _Tally()
    tally.n, tally.no_thinking, tally.blocks = int(n), int(no_thinking), int(blocks)
    tally.exact, tally.normalised = int(exact), int(normalised)
    return tally


def visibility_from_arrays(
    matcher: Matcher,
    *,
    session,
    agent,
    order,
    delivered_at,
    blocks,
    exact,
    normalised,
) -> dict:
    """`visibility_from_matches` over column arrays, one row a call (`delivered_at` NaN:
    never delivered): the same counts, summed with numpy rather than call by call."""
    session = np.asarray(session)
    agent = np.asarray(agent)
    order = np.asarray(order, dtype=np.float64)
    delivered = np.asarray(delivered_at, dtype=np.float64)
    blocks = np.asarray(blocks, dtype=np.int64)
    exact = np.asarray(exact, dtype=bool)
    normalised = np.asarray(normalised, dtype=bool)
    inside = ~np.isnan(delivered) & (order >= np.nan_to_num(delivered, nan=np.inf))
    has = inside & (blocks > 0)
    columns = {
        "n": has,
        "no_thinking": inside & (blocks == 0),
        "blocks": np.where(has, blocks, 0),
        "exact": has & exact,
        "normalised": has & normalised,
    }
    overall = _tally_of(*(int(v.sum()) for v in columns.values()))
    lows = np.array([low for low, _ in TURN_BINS], dtype=np.float64)
    bins = np.searchsorted(lows, np.where(inside, order - np.nan_to_num(delivered), 0), "right") - 1
    by_bin = [
        _tally_of(*(int(v[inside & (bins == b)].sum()) for v in columns.values()))
        for b in range(len(TURN_BINS))
    ]
    frame = pd.DataFrame({k: v[inside] for k, v in columns.items()})
    frame["session"] = session[inside]
    sums = frame.groupby("session", sort=False).sum()
    by_session = [
        {"session": key.item() if hasattr(key, "item") else key, **_tally_of(*row).as_dict()}
        for key, row in zip(sums.index, sums.itertuples(index=False), strict=True)
    ]
    pairs = pd.DataFrame({"s": session[inside], "a": agent[inside]}).drop_duplicates()
    return {
        "instruction": matcher.exact_text,
        "normalised_instruction": matcher.normalised_text,
        "method": METHOD,
        "overall": overall.as_dict(),
        "calls_outside_window": int((~inside).sum()),
        "sessions": len(pd.unique(session)),
        "sessions_delivered": len(sums),
        "agents_delivered": len(pairs),
        "by_session": by_session,
        "by_turns": [
            {"turns": [low, high], "label": bin_label(low, high), **tally.as_dict()}
            for (low, high), tally in zip(TURN_BINS, by_bin, strict=True)
        ],
    }


# Text stored in PostgreSQL cannot hold NUL: the readers that store text for matching in
# the database put this private-use character in its place (neither a space, nor
# punctuation, nor a symbol, so matching is unchanged for instructions without either).
NUL_STAND_IN = "\ue000"
