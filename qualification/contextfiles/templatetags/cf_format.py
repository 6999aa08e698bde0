"""Formatting for differences, intervals and p-values on the context-file pages."""

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

import numfmt

register = template.Library()


@register.filter
def inline_code(text):
    """Escape the text, then show `backticked` spans as <code>."""
    escaped = escape(text or "")
    return mark_safe(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))  # noqa: S308 - escaped first


@register.filter
def lines(instruction):
    start, end = instruction.line_start, instruction.line_end
    return f"line {start}" if start == end else f"lines {start}–{end}"


@register.filter
def pp(value, digits=1):
    """0.0621 → '+6.2 pp' (a difference of proportions in percentage points)."""
    return numfmt.points(value, int(digits))


@register.filter
def ci_pp(interval, digits=1):
    """[lo, hi] → '−11.9 to −0.5 pp'."""
    if not interval:
        return numfmt.DASH
    low, high = (numfmt.points(bound, int(digits)) for bound in interval[:2])
    return f"{low[:-3]} to {high}"


@register.filter
def pvalue(value):
    if value is None:
        return numfmt.DASH
    value = float(value)
    if value < 0.001:
        return "< .001"
    return f"{value:.3f}".lstrip("0") if value < 1 else "1"


@register.filter
def share(value, digits=0):
    """0.42 → '42%'."""
    return numfmt.percent(value, int(digits))


@register.filter
def signed_pct(value, digits=0):
    """0.12 → '+12%'."""
    return numfmt.signed_percent(value, int(digits))


@register.filter
def points(value):
    """0.15 → '15' (a bound in percentage points, without a sign)."""
    if value is None:
        return numfmt.DASH
    return numfmt.number(100 * float(value), 3)
