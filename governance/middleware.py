"""Login for every page; API and OTLP endpoints authenticate themselves (401, not a redirect).
A message, not a bare 400, for an upload of too many files. The Content-Security-Policy."""

from urllib.parse import urlsplit

from csp.constants import UNSAFE_INLINE
from csp.middleware import CSPMiddleware
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import TooManyFilesSent
from django.http import HttpResponseRedirect
from django.shortcuts import resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect

from governance.services import too_many_files_message

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


class MultipartFileLimitMiddleware:
    """A page's multipart POST over DATA_UPLOAD_MAX_NUMBER_FILES gets a message.

    Django raises TooManyFilesSent while parsing the body, and the CSRF check parses it
    before the view runs, so a view cannot catch it: the browser got a bare 400. Listed
    just before CsrfViewMiddleware, this parses the body first for the views that check
    (that parse would happen anyway) and redirects back with the message. CSRF-exempt
    views (the API, streaming uploads) parse on their own terms and are left alone.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if (
            request.method != "POST"
            or request.content_type != "multipart/form-data"
            or getattr(view_func, "csrf_exempt", False)
        ):
            return None
        try:
            request.POST  # noqa: B018 (parses the body, files included)
        except TooManyFilesSent:
            messages.error(request, too_many_files_message())
            return HttpResponseRedirect(request.get_full_path(), status=303)
        return None


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's CONTENT_SECURITY_POLICY on every response, with one exception.

    DRF's browsable API (its own templates, not ours) places elements with style="…"
    attributes; on those HTML pages style attributes may apply (style-src-attr). Style
    attributes run no script and load nothing from elsewhere (img-src and font-src stay
    'self'); <style> elements and scripts stay as strict as everywhere else.
    """

    def get_policy_parts(self, request, response, report_only=False):
        parts = super().get_policy_parts(request, response, report_only)
        if (
            not report_only
            and request.path_info.startswith("/api/v1/")
            and response.get("Content-Type", "").startswith("text/html")
        ):
            parts.update = {**(parts.update or {}), "style-src-attr": [UNSAFE_INLINE]}
        return parts
