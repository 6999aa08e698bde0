"""Template filters for qualification numbers: strata as 8K/128K, intervals, probabilities."""

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from qualification.analysis.tokens import format_tokens

register = template.Library()


@register.filter
def ktokens(value):
    """8000 → 8K, 131072 → 128K; '–' for nothing."""
    if value in (None, ""):
        return "–"
    try:
        return format_tokens(int(value))
    except (TypeError, ValueError):
        return value


@register.filter
def interval(bounds, digits=1):
    """[0.846, 0.914] → '84.6–91.4%'."""
    if not bounds or bounds[0] is None or bounds[1] is None:
        return "–"
    digits = int(digits)
    return f"{100 * bounds[0]:.{digits}f}–{100 * bounds[1]:.{digits}f}%"


@register.filter
def prob(value):
    if value is None:
        return "–"
    return f"{float(value):.2f}"


@register.filter
def doublings(value):
    """A shift in doublings: +1, −0.5, 0."""
    if value is None:
        return "–"
    if abs(value) < 1e-9:
        return "no change"
    sign = "+" if value > 0 else "−"
    return f"{sign}{abs(value):g} doubling{'s' if abs(value) != 1 else ''}"


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
