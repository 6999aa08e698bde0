"""Login for every page; API and OTLP endpoints authenticate themselves (401, not a redirect)."""

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect

SELF_AUTHENTICATING_PREFIXES = ("/api/v1/", "/api/schema/", "/v1/")


class LoginRequiredMiddleware(DjangoLoginRequired):
    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith(SELF_AUTHENTICATING_PREFIXES):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)

    def handle_no_permission(self, request, view_func):
        if request.headers.get("HX-Request") != "true":
            return super().handle_no_permission(request, view_func)
        # A 302 would be followed inside the XHR and the login page swapped into a panel:
        # tell htmx to load the login page in the whole window, then come back to this page.
        login = redirect_to_login(
            _page_behind_htmx_request(request),
            resolve_url(self.get_login_url(view_func) or settings.LOGIN_URL),
            self.get_redirect_field_name(view_func),
        )
        return HttpResponseClientRedirect(login["Location"])


def _page_behind_htmx_request(request) -> str:
    """The page the browser shows (HX-Current-URL) when it is ours, else the requested path."""
    current = request.headers.get("HX-Current-URL", "")
    if current and url_has_allowed_host_and_scheme(
        current, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        parts = urlsplit(current)
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return request.get_full_path()
