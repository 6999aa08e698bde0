"""Template filters for qualification numbers: intervals, probabilities, doublings (thin
wrappers over `numfmt`)."""

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

import numfmt

register = template.Library()


@register.filter
def ktokens(value):
    """The `tokens` filter under its older name, for templates that still say `ktokens`."""
    return numfmt.tokens(value)


@register.filter
def interval(bounds, digits=1):
    """[0.846, 0.914] → '84.6–91.4%'."""
    if not bounds or bounds[0] is None or bounds[1] is None:
        return numfmt.DASH
    low, high = (numfmt.percent(b, int(digits)) for b in bounds)
    return f"{low[:-1]}–{high}"


@register.filter
def prob(value):
    """A probability: 0.973 → '0.97'."""
    if numfmt.number(value) == numfmt.DASH:
        return numfmt.DASH
    return f"{float(value):.2f}"


@register.filter
def doublings(value):
    """A shift in doublings: '+1 doubling', '−0.64 doublings', 'no change'."""
    return numfmt.doublings(value)


@register.filter
def zip_strata(probabilities, strata):
    """Pair P(ECL ≥ L) values with their strata for a small table."""
    return list(zip(strata or [], probabilities or [], strict=False))


@register.filter
def dict_items_sorted(mapping):
    return sorted((mapping or {}).items())


@register.filter
def code_ticks(text):
    """Escape the text, then show `names` in backticks as code: "stage `plan` budget"."""
    return mark_safe(re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(str(text))))  # noqa: S308
