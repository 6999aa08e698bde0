"""Login for every page; API and OTLP endpoints authenticate themselves (401, not a redirect)."""

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired

SELF_AUTHENTICATING_PREFIXES = ("/api/v1/", "/api/schema/", "/v1/")


class LoginRequiredMiddleware(DjangoLoginRequired):
    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith(SELF_AUTHENTICATING_PREFIXES):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
