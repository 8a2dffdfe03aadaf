"""One JSON shape for every API error: {"code", "detail", "field"?}.

Why: a frontend must branch on a stable `code`, never parse prose, and a bad
input must never surface as a 500. Services raise the exceptions below; the DRF
exception handler (and the plain-Django handlers for 404/500) render them.
"""
from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request, page_not_found, server_error
from django_ratelimit.exceptions import Ratelimited
from rest_framework import exceptions as drf_exc
from rest_framework import status
from rest_framework.response import Response

log = logging.getLogger(__name__)


class ApiError(Exception):
    """Base for errors a service wants shown to the caller as they are."""

    status_code = 400
    code = "bad_request"

    def __init__(self, detail: str, *, field: str | None = None, code: str | None = None,
                 extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field
        if code:
            self.code = code
        self.extra = extra or {}
        self.headers = headers or {}


class BadInput(ApiError):
    status_code = 400
    code = "invalid"


class NotFound(ApiError):
    status_code = 404
    code = "not_found"


class Forbidden(ApiError):
    status_code = 403
    code = "forbidden"


class InsufficientScope(Forbidden):
    """The request's API key lacks the scope the operation needs (accounts/permissions.py); `required_scope`
    names it."""

    code = "insufficient_scope"


class InsufficientCredits(ApiError):
    status_code = 402
    code = "insufficient_credits"


class Conflict(ApiError):
    status_code = 409
    code = "conflict"


class Unprocessable(ApiError):
    status_code = 422
    code = "unprocessable"


class RateLimited(ApiError):
    status_code = 429
    code = "rate_limited"


class DependencyDown(ApiError):
    """A backing service (postgres, redis, qdrant, embeddings, llm) failed; nothing was charged."""

    status_code = 503
    code = "dependency_unavailable"

    def __init__(self, dependency: str, detail: str | None = None) -> None:
        super().__init__(detail or f"{dependency} is unavailable", extra={"dependency": dependency})
        self.dependency = dependency


def error_body(code: str, detail: str, field: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "detail": detail}
    if field:
        body["field"] = field
    body.update(extra)
    return body


def _first_field_error(data: Any, prefix: str = "") -> tuple[str | None, str]:
    """Flatten DRF's nested validation errors to the first (field, message)."""
    if isinstance(data, dict):
        for key, value in data.items():
            name = str(key) if key != "non_field_errors" else None  # list items come keyed 0, 1, ...
            path = f"{prefix}.{name}" if prefix and name else (name or prefix or None)
            field, msg = _first_field_error(value, path or "")
            return field or path, msg
    if isinstance(data, list) and data:
        for i, item in enumerate(data):  # a list serializer reports [{}, {"text": [...]}]: name the bad item
            if item in ({}, [], None, ""):
                continue
            if isinstance(item, dict):
                return _first_field_error(item, f"{prefix}.{i}" if prefix else str(i))
            return _first_field_error(item, prefix)
    return (prefix or None), str(data)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApiError):
        resp = Response(error_body(exc.code, exc.detail, exc.field, **exc.extra), status=exc.status_code)
        for k, v in exc.headers.items():
            resp[k] = v
        return resp
    if isinstance(exc, Ratelimited):
        return ratelimited_response()
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("body_too_large", "The body is larger than the server accepts."), status=413)
    if is_statement_timeout(exc):
        return Response(statement_timeout_body(), status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, DjangoValidationError):
        field, msg = _first_field_error(getattr(exc, "message_dict", None) or exc.messages)
        return Response(error_body("invalid", msg, field), status=400)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "Not found."), status=404)
    if isinstance(exc, PermissionDenied):
        return Response(error_body("forbidden", "You do not have permission to do this."), status=403)
    if isinstance(exc, drf_exc.ValidationError):
        field, msg = _first_field_error(exc.detail)
        return Response(error_body("invalid", msg, field), status=400)
    if isinstance(exc, drf_exc.ParseError):
        return Response(error_body("malformed_json", str(exc.detail)), status=400)
    if isinstance(exc, drf_exc.UnsupportedMediaType):
        return Response(error_body("unsupported_media_type", str(exc.detail)), status=415)
    if isinstance(exc, (drf_exc.NotAuthenticated, drf_exc.AuthenticationFailed)):
        code = exc.default_code if isinstance(exc.default_code, str) else "authentication_failed"
        resp = Response(error_body(code, str(exc.detail)), status=401)
        resp["WWW-Authenticate"] = 'Bearer realm="api"'
        return resp
    if isinstance(exc, drf_exc.Throttled):
        return ratelimited_response(exc.wait)
    if isinstance(exc, drf_exc.APIException):
        code = exc.default_code if isinstance(exc.default_code, str) else "error"
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return Response(error_body(code, str(detail)), status=exc.status_code)
    # rest_framework.views loads DRF's settings, which import our authentication classes, which import this module
    from rest_framework.views import exception_handler as drf_default_handler  # noqa: PLC0415 - see above

    resp = drf_default_handler(exc, context)
    if resp is not None:
        return resp
    dep = dependency_of(exc)
    if dep:
        log.warning("dependency %s failed: %s", dep, exc)
        return Response(error_body("dependency_unavailable", f"{dep} is unavailable", dependency=dep),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE)
    return None


def is_statement_timeout(exc: BaseException) -> bool:
    """Postgres cancelled a statement (SQLSTATE 57014): the request's statement_timeout ran out."""
    if not isinstance(exc, DatabaseError):
        return False
    cause = exc.__cause__
    return getattr(cause, "sqlstate", None) == "57014"


def statement_timeout_body() -> dict[str, Any]:
    return error_body("statement_timeout",
                      f"The request needed the database for longer than {settings.STATEMENT_TIMEOUT_MS} ms and was "
                      "stopped; nothing was written or charged. Narrow it (a shorter path glob, fewer filters).",
                      dependency="postgres")


def dependency_of(exc: BaseException) -> str | None:
    """Name the backing service behind an unexpected exception, if we can tell."""
    try:
        import redis.exceptions as redis_exc  # noqa: PLC0415 - optional dependency: absent is handled here
        redis_errors: tuple = (redis_exc.ConnectionError, redis_exc.TimeoutError)
    except ImportError:  # pragma: no cover
        redis_errors = ()
    if isinstance(exc, (OperationalError, InterfaceError)):
        return "postgres"
    if redis_errors and isinstance(exc, redis_errors):
        return "redis"
    return None


def ratelimited_response(wait: float | None = None) -> Response:
    retry = max(1, int(wait or 60))
    resp = Response(error_body("rate_limited", "Too many requests; slow down.", retry_after=retry), status=429)
    resp["Retry-After"] = str(retry)
    return resp


def json_404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", "Not found."), status=404)
    return page_not_found(request, exception)


def json_400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        if isinstance(exception, RequestDataTooBig):
            return JsonResponse(error_body("body_too_large", "The body is larger than the server accepts."),
                                status=413)
        return JsonResponse(error_body("bad_request", "Bad request."), status=400)
    return bad_request(request, exception)


def json_500(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("server_error", "Internal error."), status=500)
    return server_error(request)
