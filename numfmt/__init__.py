"""How numbers read on pages, in chart labels and in exports' text: one formatter per kind.

Pure (no Django), so analysis modules and chart builders use it as well as templates.

- tokens: exact below 1,000 ("999"); from 1,000 three significant figures, trailing zeros
  dropped, with a lower-case suffix k, M or B ("12.3k", "128k", "1.37M", "2B"). A whole
  multiple of 1,024 is read in binary units, as context windows are named: 131,072 → "128k".
- counts: exact, with thousands separators ("12,000").
- costs: US dollars; cents from $1 ("$1,368.19"), three significant figures below ("$0.0412").
- ratios: three significant figures and "×" ("2.37×").
- percentages of a fraction: one decimal unless told ("41.9%"); percentage points ("+6.2 pp").
- other floats, doublings: a bounded number of significant figures ("0.644", "−0.64 doublings").

Negative numbers take the minus sign U+2212, as Plotly's d3-format writes them. Nothing
(None, "", NaN) reads "–". Charts use `TOKENS_D3` in hover templates and tick formats: d3's
".3~s" writes the same as `tokens` except binary multiples and billions ("G").
"""

from __future__ import annotations

import math

DASH = "–"
MINUS = "−"
TOKENS_D3 = ".3~s"
SUFFIXES = {1: "k", 2: "M", 3: "B"}


def _value(value) -> float | None:
    """A finite float, or None for nothing, text that is no number, NaN and infinities."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _sign(number: float) -> str:
    return MINUS if number < 0 else ""


def _signed(number: float, text: str) -> str:
    """'+' or '−' before `text` (the magnitude), none when it reads as zero."""
    if not float(text.replace(",", "")):
        return text
    return f"{MINUS if number < 0 else '+'}{text}"


def significant(number: float, digits: int = 3, max_decimals: int = 6) -> str:
    """`number` (≥ 0) to `digits` significant figures in fixed point, at most `max_decimals`
    decimals, trailing zeros dropped, thousands grouped: 0.000123456 → '0.000123',
    1234.5 → '1,234' (whole digits stay)."""
    if number == 0:
        return "0"
    magnitude = math.floor(math.log10(number))
    decimals = min(max(digits - 1 - magnitude, 0), max_decimals)
    text = f"{number:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def tokens(value) -> str:
    """Token counts: '999', '12.3k', '128k' (also 131,072), '1.37M', '2B'."""
    number = _value(value)
    if number is None:
        return DASH
    sign, whole = _sign(number), round(abs(number))
    if whole < 1000:
        return f"{sign}{whole}"
    power = min(int(math.log10(whole)) // 3, 3)
    binary = 1024**power
    if whole % binary == 0 and whole % 1000**power:
        return f"{sign}{whole // binary:,}{SUFFIXES[power]}"
    scaled = float(significant(whole / 1000**power).replace(",", ""))
    if scaled >= 1000 and power < 3:  # 999,999 rounds up to the next unit: '1M', not '1000k'
        power += 1
        scaled = float(significant(whole / 1000**power).replace(",", ""))
    return f"{sign}{significant(scaled)}{SUFFIXES[power]}"


def count(value) -> str:
    """Whole things (calls, trials, rows), exact: '12,000'."""
    number = _value(value)
    if number is None:
        return DASH
    return f"{_sign(number)}{round(abs(number)):,}"


def usd(value) -> str:
    """Costs in US dollars: '$1,368.19', '$4.12', '$0.50', '$0.0412', '−$3.00'."""
    number = _value(value)
    if number is None:
        return DASH
    amount = abs(number)
    if amount >= 1 or amount == 0:
        text = f"{amount:,.2f}"
    else:
        text = significant(amount)
        if len(text.partition(".")[2]) < 2:
            text = f"{amount:.2f}"
    return f"{_sign(number)}${text}"


def ratio(value) -> str:
    """How many times: '2.37×', '12.5×', '1,368×'."""
    number = _value(value)
    if number is None:
        return DASH
    return f"{_sign(number)}{significant(abs(number))}×"


def percent(value, digits: int = 1) -> str:
    """A fraction as a percentage: 0.4189 → '41.9%'."""
    number = _value(value)
    if number is None:
        return DASH
    text = f"{100 * abs(number):.{int(digits)}f}"
    return f"{_sign(number) if float(text) else ''}{text}%"


def signed_percent(value, digits: int = 0) -> str:
    """A relative change: 0.12 → '+12%', −0.05 → '−5%'."""
    number = _value(value)
    if number is None:
        return DASH
    return f"{_signed(number, f'{100 * abs(number):.{int(digits)}f}')}%"


def points(value, digits: int = 1) -> str:
    """A difference of two fractions in percentage points: 0.0621 → '+6.2 pp'."""
    number = _value(value)
    if number is None:
        return DASH
    return f"{_signed(number, f'{100 * abs(number):.{int(digits)}f}')} pp"


def number(value, digits: int = 3) -> str:
    """Any other quantity, to `digits` significant figures: 0.643856 → '0.644'."""
    value = _value(value)
    if value is None:
        return DASH
    return f"{_sign(value)}{significant(abs(value), digits)}"


def signed(value, digits: int = 2, max_decimals: int = 2) -> str:
    """A change, with its sign: '+1', '−0.64', '0'."""
    value = _value(value)
    if value is None:
        return DASH
    return _signed(value, significant(abs(value), digits, max_decimals))


def doublings(value) -> str:
    """A shift along a log2 token axis: '+1 doubling', '−0.64 doublings', 'no change'."""
    shift = _value(value)
    if shift is None:
        return DASH
    text = signed(shift)
    if text == "0":
        return "no change"
    return f"{text} doubling{'' if text[1:] == '1' else 's'}"
