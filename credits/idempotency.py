"""Idempotency keys that reserve before work, under a lease.

(key, user, endpoint) is inserted as in_progress, committed, before the work
starts. A concurrent duplicate sees the row: 409. A completed key replays the
stored status and bytes exactly. The same key with another body: 422. The work
and the completion commit together, so a charge never exists without its
stored response; a failed request deletes its reservation so it can be retried.

A reservation belongs to one attempt for a lease (IDEMPOTENCY_LEASE_S), so a key cannot stick: a process killed
between its reservation and its completion would otherwise leave the key in_progress for the whole TTL, and every
retry would get 409 for a day. Once the lease has ended, a retry of the same request takes the key over (attempt + 1,
a new lease) and runs the work. Ownership is fenced in the database, never trusted to a clock:
- the work's transaction first locks its row as this attempt (pk and attempt, select_for_update). A holder that
  lost the key finds no row and does not run the work; one that owns it keeps the lock until it commits;
- a takeover locks the row with SKIP LOCKED, so a holder alive inside its work transaction is never taken over
  however long it runs (409); a killed process's transaction is rolled back by Postgres, which frees the row;
- the completion is a conditional UPDATE on pk and attempt in the work's transaction: if it matches nothing, the
  whole transaction, charge included, rolls back and the loser answers with the winner's stored response, or 409.
"""
from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from config.errors import BadInput, Conflict, Unprocessable
from credits.models import IdempotencyKey

if TYPE_CHECKING:
    from rest_framework.request import Request

    from accounts.models import User

HEADER = "Idempotency-Key"
MAX_KEY_LEN = 255


def request_fingerprint(*, method: str, path: str, body: bytes) -> str:
    """The same JSON in another key order or spacing is the same request; anything else is compared byte for byte."""
    try:
        canonical = json.dumps(json.loads(body or b"null"), sort_keys=True, separators=(",", ":")).encode()
    except (ValueError, UnicodeDecodeError, RecursionError):  # not JSON, or nested past what json can read
        canonical = body
    return hashlib.sha256(method.encode() + b" " + path.encode() + b"\n" + canonical).hexdigest()


def _replay(row: IdempotencyKey) -> HttpResponse:
    resp = HttpResponse(bytes(row.response_body or b""), status=row.response_status,
                        content_type=row.response_content_type or "application/json")
    resp["Idempotent-Replayed"] = "true"
    return resp


def _in_progress() -> Conflict:
    return Conflict("A request with this Idempotency-Key is still in progress.", field=HEADER,
                    code="idempotency_in_progress")


def _lease_end(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.IDEMPOTENCY_LEASE_S)


def _lease_over(row: IdempotencyKey, now: datetime) -> bool:
    """A NULL lease (a reservation made by code that predates leases) is never over: its holder may still complete
    without the ownership check, so only the TTL may end it."""
    return row.lease_expires_at is not None and row.lease_expires_at <= now


def _take_over(*, pk: int) -> IdempotencyKey | HttpResponse | None:
    """Take an in-progress reservation whose lease has ended; None when it is gone (reserve afresh).

    Decided under the row's lock, taken with SKIP LOCKED: a row locked by a live holder's work transaction (or by
    another retry taking it over right now) is in progress, whatever its lease says, and waiting for it would only
    run into the statement timeout."""
    with transaction.atomic():
        row = IdempotencyKey.objects.select_for_update(skip_locked=True).filter(pk=pk).first()
        if row is None:
            if IdempotencyKey.objects.filter(pk=pk).exists():
                raise _in_progress()
            return None
        if row.status == IdempotencyKey.Status.COMPLETED:
            return _replay(row)  # completed between our read and our lock
        now = timezone.now()
        if not _lease_over(row, now):
            raise _in_progress()  # another retry took it over just before us
        row.attempt += 1
        row.lease_expires_at = _lease_end(now)
        row.expires_at = now + settings.IDEMPOTENCY_TTL  # the work runs now: its stored response lives a full TTL
        row.save(update_fields=["attempt", "lease_expires_at", "expires_at"])
        return row


def reserve(*, user: User, key: str, endpoint: str, request_hash: str) -> IdempotencyKey | HttpResponse:
    """Insert the reservation (committed at once), take over one whose lease has ended, or answer for the
    existing one. The returned row is owned by its `attempt`; pass it to `run_reserved`."""
    if not key or len(key) > MAX_KEY_LEN:
        raise BadInput(f"{HEADER} must be 1..{MAX_KEY_LEN} characters", field=HEADER)
    for _ in range(3):
        now = timezone.now()
        try:
            with transaction.atomic():
                return IdempotencyKey.objects.create(key=key, user=user, endpoint=endpoint, request_hash=request_hash,
                                                     expires_at=now + settings.IDEMPOTENCY_TTL,
                                                     lease_expires_at=_lease_end(now))
        except IntegrityError:
            row = IdempotencyKey.objects.filter(key=key, user=user, endpoint=endpoint).first()
            if row is None:
                continue  # deleted between our insert and read: try again
            if row.expires_at <= now:
                IdempotencyKey.objects.filter(pk=row.pk, expires_at__lte=now).delete()
                continue
            if row.request_hash != request_hash:
                raise Unprocessable("This Idempotency-Key was used with a different request.",
                                    field=HEADER, code="idempotency_key_reused") from None
            if row.status == IdempotencyKey.Status.COMPLETED:
                return _replay(row)
            if not _lease_over(row, now):
                raise _in_progress() from None
            taken = _take_over(pk=row.pk)
            if taken is not None:
                return taken
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


class _LostReservation(Exception):
    """Raised inside the work's transaction to roll all of it back: this attempt no longer owns the reservation."""


def _owned(reservation: IdempotencyKey) -> QuerySet[IdempotencyKey]:
    return IdempotencyKey.objects.filter(pk=reservation.pk, attempt=reservation.attempt,
                                         status=IdempotencyKey.Status.IN_PROGRESS)


def _answer_lost(reservation: IdempotencyKey) -> HttpResponse:
    """The key was taken over: answer what the winner stored, if it has completed (the client gets what its own
    retry got), else 409 like any duplicate in flight."""
    row = IdempotencyKey.objects.filter(pk=reservation.pk, status=IdempotencyKey.Status.COMPLETED).first()
    if row is not None and row.request_hash == reservation.request_hash:
        return _replay(row)
    raise _in_progress()


def run_reserved(*, reservation: IdempotencyKey, work: Callable[[], Any]) -> HttpResponse:
    """Run `work` for a reservation that `reserve` returned, and complete it in the same transaction, but only while
    this attempt still owns it: a holder that lost its lease runs nothing and charges nothing."""
    try:
        with transaction.atomic():
            if _owned(reservation).select_for_update().values_list("pk", flat=True).first() is None:
                raise _LostReservation
            response = _as_bytes(work())
            if 200 <= response.status_code < 300:
                completed = _owned(reservation).update(
                    status=IdempotencyKey.Status.COMPLETED, response_status=response.status_code,
                    response_body=response.content, response_content_type=response["Content-Type"])
                if completed != 1:
                    raise _LostReservation  # unreachable while the lock above holds; the fence does not rely on it
                return response
    except _LostReservation:
        return _answer_lost(reservation)
    except BaseException:
        _owned(reservation).delete()
        raise
    _owned(reservation).delete()
    return response


def run_idempotent(*, user: User, key: str | None, endpoint: str, request_hash: str,
                   work: Callable[[], Any]) -> HttpResponse:
    """Run `work` once per key; `work` returns a DRF Response or HttpResponse."""
    if key is None:
        with transaction.atomic():
            return _as_bytes(work())
    reserved = reserve(user=user, key=key, endpoint=endpoint, request_hash=request_hash)
    if isinstance(reserved, HttpResponse):
        return reserved
    return run_reserved(reservation=reserved, work=work)


def idempotent(endpoint: str | Callable[..., str]) -> Callable:
    """Decorator for DRF view methods. `endpoint` may be a callable of (request, **kwargs)."""

    def deco(method: Callable) -> Callable:
        @functools.wraps(method)
        def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
            name = endpoint(request, **kwargs) if callable(endpoint) else endpoint
            key = request.headers.get(HEADER)
            fp = request_fingerprint(method=request.method, path=name, body=request.body)
            request.data  # noqa: B018 - parse now: a malformed body is refused before any key is reserved
            return run_idempotent(user=request.user, key=key, endpoint=name, request_hash=fp,
                                  work=lambda: method(self, request, *args, **kwargs))

        return wrapper

    return deco


def purge_expired() -> int:
    """Delete keys past expires_at and return how many. An expired key already frees its (key, user, endpoint) in
    `reserve`, so this only keeps the table small; beat runs it (credits.tasks.purge_expired_idempotency_keys)."""
    return IdempotencyKey.objects.filter(expires_at__lte=timezone.now()).delete()[0]
