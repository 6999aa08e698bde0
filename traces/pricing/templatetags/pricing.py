"""`{% cost_source source %}`: a cost's source, with a price table version linked to its page."""

import re

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join

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
