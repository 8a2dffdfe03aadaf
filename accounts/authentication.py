"""DRF authentication by `Authorization: Bearer <api key>`."""
from __future__ import annotations

from rest_framework import authentication, exceptions

from accounts.apikeys import verify_api_key


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):  # noqa: ANN001, ANN201 - DRF signature
        header = authentication.get_authorization_header(request).decode("latin-1", "replace")
        if not header:
            return None
        parts = header.split()
        if len(parts) != 2 or parts[0].lower() != self.keyword.lower():
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <api key>'.")
        key = verify_api_key(secret=parts[1])
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return key.user, key

    def authenticate_header(self, request) -> str:  # noqa: ANN001
        return 'Bearer realm="api"'


try:  # document the scheme in /api/schema/ (registered on import; drf-spectacular is a pinned dependency)
    from drf_spectacular.extensions import OpenApiAuthenticationExtension

    class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
        target_class = "accounts.authentication.ApiKeyAuthentication"
        name = "ApiKeyAuth"

        def get_security_definition(self, auto_schema):  # noqa: ANN001, ANN201
            return {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <api key>"}
except ImportError:  # pragma: no cover
    pass
