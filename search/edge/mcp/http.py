"""POST /mcp: the MCP server over streamable HTTP, inside the Django app (WSGI: runserver, gunicorn).

Why a plain Django view: the app is served by WSGI, and the SDK's transport is ASGI. Each request is
authenticated here with the API's own Bearer keys (accounts.authentication: a wrong or revoked key is 401
authentication_failed, an expired one 401 key_expired, none 401 not_authenticated: the API's JSON errors), then
handed to the SDK's streamable-HTTP transport in stateless, JSON-response mode (search.edge.mcp.server.serve_http)
through async_to_sync: one request in, one JSON-RPC answer out, nothing kept between requests, so any number
of web processes can serve it. The tools' Django work runs back on this request's thread (thread-sensitive
sync_to_async), inside the request's middleware (statement timeout, input guard). No CSRF: a Bearer key, not a
cookie, authenticates.

Every request ends (docs/security.md, "Requests that end"): GET (a server-to-client stream, which a stateless
server never feeds) and DELETE (end a session: there are none) answer 405 at once, before authentication touches
the database; a POST runs under a deadline of MCP_REQUEST_TIMEOUT_S (config.deadlines), which the tools' work checks
where it loops, so the work itself stops there: a tool that can answer part of its result does (`complete:
false`), another answers the API's 504 `request_timeout` as a tool error. Waiting alone could not do it: the
tools run on this request's thread, so a timer around them could only answer once the work had ended (minutes,
for a crafted file). The timer stays, ANSWER_GRACE_S later, for work that checks no deadline: 504 then.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from asgiref.sync import async_to_sync
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions

from accounts.authentication import ApiKeyAuthentication
from config.deadlines import deadline_after
from config.errors import error_body
from search.edge.mcp.server import Caller, serve_http

if TYPE_CHECKING:
    from search.edge.mcp.server import Caller

_SKIP_HEADERS = {"content-length", "transfer-encoding", "connection"}
ANSWER_GRACE_S = 2.0  # after the deadline stopped the work: time to render and send what it answered


def _unauthorized(code: str, detail: str) -> JsonResponse:
    resp = JsonResponse(error_body(code, detail), status=401)
    resp["WWW-Authenticate"] = 'Bearer realm="api"'
    return resp


def _caller(request: HttpRequest) -> Caller | JsonResponse:
    try:
        found = ApiKeyAuthentication().authenticate(request)  # reads the Authorization header only
    except exceptions.AuthenticationFailed as exc:
        return _unauthorized(str(exc.default_code), str(exc.detail))
    if found is None:
        exc = exceptions.NotAuthenticated()
        return _unauthorized(str(exc.default_code), "Use 'Authorization: Bearer <api key>'.")
    user, key = found
    request.user = user
    return Caller(user=user, key=key, request=request, transport="http")


def _scope(request: HttpRequest) -> dict[str, Any]:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()]
    host, _, port = request.get_host().partition(":")
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
            "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode(),
            "root_path": "", "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
            "headers": headers, "client": (request.META.get("REMOTE_ADDR", ""), 0),
            "server": (host, int(port) if port.isdigit() else (443 if request.is_secure() else 80))}


async def _bounded(scope: dict[str, Any], body: bytes, caller: Caller) -> tuple[int, list, bytes] | None:
    """serve_http within MCP_REQUEST_TIMEOUT_S (and the grace to answer); None when the budget ran out."""
    with anyio.move_on_after(settings.MCP_REQUEST_TIMEOUT_S + ANSWER_GRACE_S):
        return await serve_http(scope, body, caller)
    return None


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        resp = JsonResponse(error_body("method_not_allowed", "This MCP server is stateless: send JSON-RPC "
                                       "messages with POST; it opens no server-to-client stream (GET) and has no "
                                       "sessions to end (DELETE)."), status=405)
        resp["Allow"] = "POST"
        return resp
    caller = _caller(request)
    if isinstance(caller, JsonResponse):
        return caller
    with deadline_after(settings.MCP_REQUEST_TIMEOUT_S):
        answered = async_to_sync(_bounded)(_scope(request), request.body, caller)
    if answered is None:
        return JsonResponse(error_body("request_timeout", f"The MCP request did not finish within "
                                       f"{settings.MCP_REQUEST_TIMEOUT_S:g} s."), status=504)
    status, headers, body = answered
    resp = HttpResponse(body, status=status)
    for name, value in headers:
        key = name.decode("latin-1")
        if key.lower() not in _SKIP_HEADERS:
            resp[key] = value.decode("latin-1")
    return resp
