"""Idempotency keys that reserve before work (seed 001 §4.1, fixed).

(key, user, endpoint) is inserted as in_progress, committed, before the work
starts. A concurrent duplicate sees the row: 409. A completed key replays the
stored status and bytes exactly. The same key with another body: 422. The work
and the completion commit together, so a charge never exists without its
stored response; a failed request deletes its reservation so it can be retried.
"""
from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from config.errors import BadInput, Conflict, Unprocessable
from credits.models import IdempotencyKey

HEADER = "Idempotency-Key"
MAX_KEY_LEN = 255


def request_fingerprint(*, method: str, path: str, body: bytes) -> str:
    try:
        canonical = json.dumps(json.loads(body or b"null"), sort_keys=True, separators=(",", ":")).encode()
    except (ValueError, UnicodeDecodeError):
        canonical = body
    return hashlib.sha256(method.encode() + b" " + path.encode() + b"\n" + canonical).hexdigest()


def _replay(row: IdempotencyKey) -> HttpResponse:
    resp = HttpResponse(bytes(row.response_body or b""), status=row.response_status,
                        content_type=row.response_content_type or "application/json")
    resp["Idempotent-Replayed"] = "true"
    return resp


def reserve(*, user, key: str, endpoint: str, request_hash: str) -> IdempotencyKey | HttpResponse:  # noqa: ANN001
    """Insert the reservation (committed at once) or answer for the existing one."""
    if not key or len(key) > MAX_KEY_LEN:
        raise BadInput(f"{HEADER} must be 1..{MAX_KEY_LEN} characters", field=HEADER)
    now = timezone.now()
    for _ in range(3):
        try:
            with transaction.atomic():
                return IdempotencyKey.objects.create(key=key, user=user, endpoint=endpoint, request_hash=request_hash,
                                                     expires_at=now + settings.IDEMPOTENCY_TTL)
        except IntegrityError:
            row = IdempotencyKey.objects.filter(key=key, user=user, endpoint=endpoint).first()
            if row is None:
                continue  # deleted between our insert and read: try again
            if row.expires_at <= now:
                IdempotencyKey.objects.filter(pk=row.pk, expires_at__lte=now).delete()
                continue
            if row.request_hash != request_hash:
                raise Unprocessable("This Idempotency-Key was used with a different request.",
                                    field=HEADER, code="idempotency_key_reused")
            if row.status == IdempotencyKey.Status.IN_PROGRESS:
                raise Conflict("A request with this Idempotency-Key is still in progress.",
                               field=HEADER, code="idempotency_in_progress")
            return _replay(row)
    raise Conflict("Could not reserve the Idempotency-Key; retry.", field=HEADER, code="idempotency_in_progress")


def _as_bytes(response: Any) -> HttpResponse:
    if isinstance(response, Response):
        body = JSONRenderer().render(response.data)
        out = HttpResponse(body, status=response.status_code, content_type="application/json")
        for k, v in response.items():
            if k.lower() not in {"content-type", "content-length"}:
                out[k] = v
        return out
    return response


def run_idempotent(*, user, key: str | None, endpoint: str, request_hash: str,  # noqa: ANN001
                   work: Callable[[], Any]) -> HttpResponse:
    """Run `work` once per key; `work` returns a DRF Response or HttpResponse."""
    if key is None:
        with transaction.atomic():
            return _as_bytes(work())
    reserved = reserve(user=user, key=key, endpoint=endpoint, request_hash=request_hash)
    if isinstance(reserved, HttpResponse):
        return reserved
    try:
        with transaction.atomic():
            response = _as_bytes(work())
            if 200 <= response.status_code < 300:
                IdempotencyKey.objects.filter(pk=reserved.pk).update(
                    status=IdempotencyKey.Status.COMPLETED, response_status=response.status_code,
                    response_body=response.content, response_content_type=response["Content-Type"])
                return response
        IdempotencyKey.objects.filter(pk=reserved.pk).delete()
        return response
    except BaseException:
        IdempotencyKey.objects.filter(pk=reserved.pk).delete()
        raise


def idempotent(endpoint: str | Callable[..., str]) -> Callable:
    """Decorator for DRF view methods. `endpoint` may be a callable of (request, **kwargs)."""

    def deco(method: Callable) -> Callable:
        @functools.wraps(method)
        def wrapper(self, request, *args, **kwargs):  # noqa: ANN001, ANN202
            name = endpoint(request, **kwargs) if callable(endpoint) else endpoint
            key = request.headers.get(HEADER)
            fp = request_fingerprint(method=request.method, path=name, body=request.body)
            return run_idempotent(user=request.user, key=key, endpoint=name, request_hash=fp,
                                  work=lambda: method(self, request, *args, **kwargs))

        return wrapper

    return deco


def purge_expired() -> int:
    """Delete keys past expires_at and return how many. An expired key already frees its (key, user, endpoint) in
    `reserve`, so this only keeps the table small; beat runs it (credits.tasks.purge_expired_idempotency_keys)."""
    return IdempotencyKey.objects.filter(expires_at__lte=timezone.now()).delete()[0]
