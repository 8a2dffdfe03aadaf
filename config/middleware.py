"""Checks every request gets before any view runs: the parts of a request no serializer sees.

Why middleware: the path (path parameters), query strings, headers, form bodies and the body's size reach code
that has no Input serializer (pages, DRF's own parsing, the idempotency header); a NUL in `Idempotency-Key`
reached a Postgres text column, `%00` in a document's path segment or a page form's field reached one too (500s),
and an oversized body got Django's HTML 400. Checking here once makes every endpoint, present and future, safe by
construction. The body is also read here, whole and against a deadline, before any view (or its database
connection) exists, so a client that trickles a body in costs a thread for a bounded time and nothing more. The same place puts each request under a Postgres `statement_timeout`, so
no request (a pathological glob, say) can hold the database longer than STATEMENT_TIMEOUT_MS.
"""
from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.multipartparser import MultiPartParserError

from config.deadlines import deadline_after
from config.errors import error_body, is_statement_timeout, statement_timeout_body
from config.fields import bad_text_reason


def _refuse(request: HttpRequest, *, status: int, code: str, detail: str, field: str | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(error_body(code, detail, field), status=status)
    where = f" ({field})" if field else ""
    return HttpResponse(f"{detail}{where}\n", status=status, content_type="text/plain; charset=utf-8")


_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
_BODY_CHUNK = 64 * 1024


def _bad_pair(pairs: QueryDict, *, where: str) -> tuple[str, str] | None:
    """(field, reason) for the first key or value of a query string or form body that no store could hold."""
    for key, values in pairs.lists():
        for text in (key, *values):
            reason = bad_text_reason(text)
            if reason:
                return key if bad_text_reason(key) is None else where, reason
    return None


def _bad_part(request: HttpRequest) -> tuple[str, str] | None:
    """(field, reason) for the first part of the URL (path, then query) or header that no store could hold.

    The path is checked as decoded: `%00` in a path parameter (a document's external id, a slug) is a NUL by
    the time a view sees it."""
    reason = bad_text_reason(request.path)
    if reason:
        return "path", reason
    bad = _bad_pair(request.GET, where="query")
    if bad:
        return bad
    for name, value in request.headers.items():
        reason = bad_text_reason(name) or bad_text_reason(value)
        if reason:
            return name, reason
    return None


def _bad_form(request: HttpRequest) -> tuple[str, str] | None:
    """(field, reason) for the first form field, value or uploaded file name that no store could hold.

    Form bodies reach page views (and DRF's form parsers) without an Input serializer's text check."""
    bad = _bad_pair(request.POST, where="form")
    if bad:
        return bad
    for key, files in request.FILES.lists():
        for f in files:
            reason = bad_text_reason(key) or bad_text_reason(f.name or "")
            if reason:
                return key if bad_text_reason(key) is None else "form", reason
    return None


def _timeout_ms(request: HttpRequest) -> int:
    return settings.ADMIN_STATEMENT_TIMEOUT_MS if request.path.startswith("/admin/") else settings.STATEMENT_TIMEOUT_MS


class _StatementTimeout:
    """A query wrapper that sets the request's statement_timeout just before its first SQL statement.

    Lazy on purpose: a request that never touches the database (the schema, a static page) opens no
    connection for it."""

    def __init__(self, ms: int) -> None:
        self.ms = int(ms)
        self.applied = False

    def __call__(self, execute: Callable, sql: str, params: object, many: bool, context: dict) -> object:
        if not self.applied:
            self.applied = True
            execute("SELECT set_config('statement_timeout', %s, false)", [f"{self.ms}ms"], False, context)
        return execute(sql, params, many, context)


class InputGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        bad = _bad_part(request)
        if bad:
            field, reason = bad
            return _refuse(request, status=400, code="invalid_character", detail=f"Text {reason}.", field=field)
        too_big = self._too_big(request)
        if too_big:
            return too_big
        unread = self._read_body(request)
        if unread:
            return unread
        if request.method == "POST" and request.content_type in _FORM_TYPES:
            try:
                bad = _bad_form(request)
            except (MultiPartParserError, UnicodeDecodeError, ValueError):
                return _refuse(request, status=400, code="malformed_body", detail="The form body cannot be parsed.")
            if bad:
                field, reason = bad
                return _refuse(request, status=400, code="invalid_character", detail=f"Text {reason}.",
                               field=field)
        timeout = _StatementTimeout(_timeout_ms(request))
        try:
            with connection.execute_wrapper(timeout), self._deadline(request):
                return self.get_response(request)
        finally:
            if timeout.applied:
                self._reset_timeout()

    @staticmethod
    def _deadline(request: HttpRequest) -> contextlib.AbstractContextManager:
        """An API request's work stops at REQUEST_DEADLINE_S (config.deadlines: the loops that can run long check
        it); the MCP endpoint sets its own per tool call, pages and the admin have none."""
        if request.path.startswith("/api/"):
            return deadline_after(settings.REQUEST_DEADLINE_S)
        return contextlib.nullcontext()

    @staticmethod
    def _read_body(request: HttpRequest) -> HttpResponse | None:
        """Read the whole body now, within REQUEST_BODY_TIMEOUT_S, before any view or database work.

        Why here: a view that authenticates first (a database read) and parses the body second would hold a
        Postgres connection while a slow client trickles its body in. Reading it up front, in chunks against a
        deadline, means a slow body costs a thread for a bounded time and never a connection (docs/security.md,
        "Requests that end"). The size was checked from Content-Length just before (_too_big); the bytes are kept
        where Django keeps a body it has read, so every later reader (forms, DRF, the MCP view) sees them."""
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length <= 0 or hasattr(request, "_body"):
            return None
        deadline = time.monotonic() + settings.REQUEST_BODY_TIMEOUT_S
        parts: list[bytes] = []
        got = 0
        try:
            while got < length:
                if time.monotonic() > deadline:
                    raise TimeoutError
                part = request.read(min(_BODY_CHUNK, length - got))
                if not part:
                    break
                parts.append(part)
                got += len(part)
        except (TimeoutError, OSError):
            return _refuse(request, status=408, code="request_timeout",
                           detail=f"The request body did not arrive within {settings.REQUEST_BODY_TIMEOUT_S:g} s.")
        if got < length:  # the client went away (or lied about the length): nothing to serve
            return _refuse(request, status=400, code="incomplete_body",
                           detail=f"The body ended after {got} of the {length} bytes Content-Length announced.")
        request._body = b"".join(parts)  # what HttpRequest.body stores once read
        request._stream = io.BytesIO(request._body)
        return None

    @staticmethod
    def _too_big(request: HttpRequest) -> HttpResponse | None:
        """A declared body over the limit is refused before anything reads it (uploads: UPLOAD_MAX_BYTES)."""
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _refuse(request, status=400, code="invalid", detail="Content-Length is not a number.")
        multipart = request.content_type == "multipart/form-data"
        limit = settings.UPLOAD_MAX_BYTES + 64 * 1024 if multipart else settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and length > limit:
            return _refuse(request, status=413, code="body_too_large",
                           detail=f"The body is {length} bytes; the limit is {limit}.")
        return None

    @staticmethod
    def _reset_timeout() -> None:
        """Leave a reused connection as it was (tests and persistent connections share it)."""
        if connection.connection is None or connection.in_atomic_block:
            return  # closed already, or a transaction whose end undoes the SET
        try:
            with connection.cursor() as cur:
                cur.execute("RESET statement_timeout")
        except DatabaseError:
            pass

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """Pages: a statement cut off by the timeout is a clear 503, not a 500 (the API's handler does the same)."""
        if is_statement_timeout(exception):
            body = statement_timeout_body()
            return _refuse(request, status=503, code=body["code"], detail=body["detail"])
        return None
