"""The one place that decides whether a request gets a fragment or a whole page."""

from django.shortcuts import render


def htmx_partial(request) -> bool:
    """True for an htmx request that is not boosted: render just the region it asked for."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted


def render_region(request, template: str, region: str, context: dict, **kwargs):
    """Render `template#region` for htmx, the whole template otherwise."""
    name = f"{template}#{region}" if htmx_partial(request) else template
    return render(request, name, context, **kwargs)
