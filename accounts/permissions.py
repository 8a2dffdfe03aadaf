"""Scopes of API keys: every DRF view says which one it needs, and this permission checks it before the view runs.

The contract (every APIView in the URLconf, tests/accounts/test_key_scopes.py checks it):

    class SomeView(APIView):
        required_scope = "query"                            # one of accounts.models.SCOPES
        required_scope = None                               # any authenticated caller
        required_scope = {"GET": "query", "POST": "manage"}  # by HTTP method (HEAD follows GET)

Why a permission class: DRF runs permissions in `initial()`, before the handler, so a refused request does
no work at all (no rate-limit count, no idempotency reservation, no charge). A session (the server-rendered
pages) has every scope; only a request authenticated by an ApiKey is limited. A view that forgets to
declare is treated as needing every scope, so a limited key is refused rather than let through.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rest_framework.permissions import BasePermission

from accounts.models import ApiKey
from accounts.scopes import SCOPES
from config.errors import InsufficientScope

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView

    from accounts.models import ApiKey

# Imported by DRF's settings while rest_framework.views loads (config.errors imports that), so the app modules
# it needs (models, errors) are imported inside has_permission.
_UNDECLARED = object()


def scope_for(view: object, method: str) -> str | None | tuple[str, ...]:
    """The scope `view` needs for `method`: a scope, None (any), or every scope when nothing is declared."""
    declared = getattr(view, "required_scope", _UNDECLARED)
    if declared is _UNDECLARED:
        return SCOPES
    if isinstance(declared, Mapping):
        method = method.upper()
        if method in declared:
            return declared[method]
        if method == "HEAD" and "GET" in declared:
            return declared["GET"]
        if method == "OPTIONS" or not hasattr(view, method.lower()):
            return None  # metadata, or a method the view does not have (405 follows)
        return SCOPES
    return declared


def is_valid_declaration(value: object) -> bool:
    """What the every-view test accepts: None, a scope, or a non-empty {METHOD: scope-or-None} mapping."""
    if value is None or value in SCOPES:
        return True
    if isinstance(value, Mapping) and value:
        return all(isinstance(m, str) and m.isupper() and (s is None or s in SCOPES) for m, s in value.items())
    return False


class KeyScopePermission(BasePermission):
    """403 insufficient_scope (with `required_scope`) when the request's API key lacks the view's scope."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            return True  # a session (pages, the browsable docs) has every scope
        needed = scope_for(view, request.method)
        if needed is None:
            return True
        require_scopes(key, (needed,) if isinstance(needed, str) else tuple(needed))
        return True


def require_scopes(key: ApiKey, wanted: tuple[str, ...]) -> None:
    """Raise 403 insufficient_scope (with `required_scope`) unless the key has every scope in `wanted`; the DRF
    permission above and the MCP server's tools (search.edge.mcp.server) refuse with the same error."""
    missing = [s for s in wanted if not key.has_scope(s)]
    if missing:
        raise InsufficientScope(
            f"This API key lacks the {missing[0]!r} scope that this operation needs; "
            f"it has: {', '.join(key.scopes) or 'none'}.", extra={"required_scope": missing[0]})
