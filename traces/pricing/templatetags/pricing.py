"""`{% cost_source source %}`: a cost's source, with a price table version linked to its page."""

import re

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join

import numfmt

register = template.Library()
_VERSION = re.compile(r"^price table v(\d+)$")


@register.simple_tag(takes_context=True)
def cost_source(context, source: str):
    request = context.get("request")
    workspace = getattr(request, "workspace", None)
    parts = []
    for part in (source or "").split(" + "):
        match = _VERSION.match(part)
        if match and workspace is not None:
            url = reverse("pricing:version", args=[workspace.slug, int(match.group(1))])
            parts.append(format_html('<a href="{}">{}</a>', url, part))
        elif part == "telemetry":
            parts.append(
                format_html(
                    '<abbr title="{}">telemetry</abbr>', "the harness's own cost_usd, as it sent it"
                )
            )
        else:
            parts.append(format_html("{}", part))
    return format_html_join(" + ", "{}", ((p,) for p in parts))


@register.simple_tag(takes_context=True)
def cost_split(context, cost):
    """Where a cost summary's dollars came from, with each source's share of them and its
    calls: "80.0% from telemetry (12 calls), 20.0% from price table v3 (2026-11-01) (30
    calls)", the version linked to its page."""
    if not getattr(cost, "priced_calls", 0):
        return cost_source(context, "no price")
    parts = []
    for usd, calls, name in (
        (cost.telemetry_usd, cost.telemetry_calls, "telemetry"),
        (cost.table_usd, cost.table_calls, f"price table v{cost.table_version}"),
    ):
        if not calls:
            continue
        share = numfmt.percent(float(usd / cost.usd)) if cost.usd else "–"
        dated = f" ({cost.table_saved})" if name != "telemetry" and cost.table_saved else ""
        parts.append(
            format_html(
                "{} from {}{} ({} call{})",
                share,
                cost_source(context, name),
                dated,
                numfmt.count(calls),
                "" if calls == 1 else "s",
            )
        )
    return format_html_join(", ", "{}", ((p,) for p in parts))
