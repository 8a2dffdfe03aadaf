"""DRF authentication by `Authorization: Bearer <api key>`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework import authentication, exceptions

from accounts.apikeys import KeyExpired, verify_api_key

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema
    from rest_framework.request import Request

    from accounts.models import ApiKey, User


class ApiKeyExpired(exceptions.AuthenticationFailed):
    default_detail = "This API key has expired; issue a new one."
    default_code = "key_expired"


def authenticate_secret(secret: str) -> tuple[User, ApiKey]:
    """The key's user (carrying the key's project limit) and the key; AuthenticationFailed (401) when the secret
    is wrong or revoked, ApiKeyExpired (401 key_expired) when it has expired. The API and the MCP server
    (search.edge.mcp.server: stdio and /mcp) authenticate through this one function."""
    try:
        key = verify_api_key(secret=secret)
    except KeyExpired:
        raise ApiKeyExpired() from None
    if key is None:
        raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
    # The project limit rides on this request's user object, so projects.access (project_for_member,
    # projects_of, ...) applies it without a request: None = every project the user is a member of.
    key.user._key_project_ids = None if key.project_ids is None else frozenset(key.project_ids)
    return key.user, key


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1", "replace")
        if not header:
            return None
        parts = header.split()
        if len(parts) != 2 or parts[0].lower() != self.keyword.lower():
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <api key>'.")
        return authenticate_secret(parts[1])

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


try:  # document the scheme in /api/schema/ (registered on import; drf-spectacular is a pinned dependency)
    from drf_spectacular.extensions import OpenApiAuthenticationExtension

    class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
        target_class = "accounts.authentication.ApiKeyAuthentication"
        name = "ApiKeyAuth"

        def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
            return {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <api key>"}
except ImportError:  # pragma: no cover
    pass
