"""What the annotation pages share: parameters read from the request, labels, links, and
the base of the POST-only actions."""

from __future__ import annotations

from urllib.parse import urlencode

from django.shortcuts import render
from django.urls import NoReverseMatch, reverse

from governance.errors import DomainError
from governance.views import WorkspaceTemplateView
from traces.annotations.analysis.classes import restart_indicators
from traces.models import AgentKind


def _int(value, default=None):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _window_param(request, default: int = 3) -> int:
    value = _int(request.GET.get("window"), default)
    return min(max(value, 0), 1000)


def agent_label(agent) -> str:
    if agent.kind == AgentKind.MAIN:
        return "main"
    return agent.description or agent.agent_type or agent.external_id[:16]


def restart_url(workspace, session, failure_class: str | None) -> str | None:
    """The specs restart-package builder, prefilled with the session and the indicators the
    failure class suggests."""
    try:
        base = reverse("specs:package_create", args=[workspace.slug])
    except NoReverseMatch:
        return None
    params = {"session": session.pk}
    indicators = restart_indicators(failure_class or "")
    if indicators:
        params["indicators"] = ",".join(indicators)
    return f"{base}?{urlencode(params, safe=',')}"


class PostOnlyView(WorkspaceTemplateView):
    """An action that only takes POST. It has no page to show again, so a domain error it
    does not turn into a flash itself (a service's `Forbidden`) shows on its own page, with
    its status."""

    http_method_names = ["post"]

    def domain_error_response(self, request, exc: DomainError, *args, **kwargs):
        return render(request, "domain_error.html", {"error": exc}, status=exc.status)
