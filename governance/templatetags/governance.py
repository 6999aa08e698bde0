"""Template helpers: workspace-scoped URLs, and number filters (thin wrappers over
`numfmt`)."""

from django import template
from django.urls import reverse
from django.utils.html import format_html

import numfmt
from governance import labels

register = template.Library()


@register.simple_tag(takes_context=True)
def wurl(context, name, *args, **kwargs):
    """`{% wurl 'traces:session_detail' session.pk %}`: reverse within the current workspace."""
    workspace = context.get("workspace") or context["request"].workspace
    if kwargs:
        return reverse(name, kwargs={"workspace": workspace.slug, **kwargs})
    return reverse(name, args=[workspace.slug, *args])


@register.filter
def tokens(value):
    """12345 → '12.3k', 131072 → '128k', 1368190000 → '1.37B' (see numfmt)."""
    return numfmt.tokens(value)


@register.filter
def pct(value, digits=1):
    """0.4189 → '41.9%'."""
    return numfmt.percent(value, int(digits))


@register.filter
def usd(value):
    """1368.19 → '$1,368.19', 0.0412 → '$0.0412'."""
    return numfmt.usd(value)


@register.filter
def ratio(value):
    """2.3712 → '2.37×'."""
    return numfmt.ratio(value)


@register.filter
def sig(value, digits=3):
    """Any other quantity to `digits` significant figures: 0.643856 → '0.644'."""
    return numfmt.number(value, int(digits))


@register.filter
def short_id(value):
    """A long id as its first 8 characters; the whole id is the title, and what a copy of the
    cell gives (the rest is clipped by `.short-id`, not removed)."""
    if value in (None, ""):
        return numfmt.DASH
    text = str(value)
    if len(text) <= 12:
        return text
    return format_html('<span class="short-id" title="{0}">{0}</span>', text)


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def split_words(value):
    """'a b c' -> ['a', 'b', 'c'] (for looping over fixed keys in templates)."""
    return str(value).split()


@register.filter
def pairs(mapping):
    """A dict's (key, value) pairs. `mapping.items` in a template reads a key named "items"
    first, which JSON data (audit details, job counts) may well have."""
    return list(mapping.items()) if isinstance(mapping, dict) else []


@register.filter
def count_category(entries, category: str) -> int:
    """How many of the dicts in `entries` have this `category`."""
    return sum(1 for entry in entries or () if entry.get("category") == category)


# --- labels for codes (governance.labels) and job durations -------------------------


@register.filter
def job_kind_label(kind):
    return labels.job_kind_label(str(kind))


@register.filter
def job_count_label(key):
    return labels.job_count_label(str(key))


@register.filter
def audit_action_label(action):
    return labels.audit_action_label(str(action))


@register.filter
def duration(value):
    """A timedelta as "45 s", "3 min 5 s" or "2 h 10 min"; "–" for none."""
    if value is None:
        return "–"
    seconds = value.total_seconds()
    if seconds < 0.1:
        return "under 0.1 s"
    if seconds < 10:
        return f"{max(seconds, 0):.1f} s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
