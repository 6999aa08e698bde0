"""`Authorization: Bearer <token>` authentication, bound to the token's workspace."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from governance.services import TokenRejected, api_token_authenticate


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header: expected 'Bearer <token>'."
            )
        try:
            token, membership = api_token_authenticate(raw=parts[1])
        except TokenRejected as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        request._request.workspace = token.workspace
        request._request.membership = membership
        return token.user, token

    def authenticate_header(self, request):
        return f'{self.keyword} realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "governance.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A workspace API token (`cg_…`), created in Settings → API tokens "
            "or with `manage.py create_api_token`.",
        }
