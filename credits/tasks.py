"""Celery tasks: housekeeping of the money tables.

Why a task: idempotency keys expire (IDEMPOTENCY_TTL) but an expired row only stops mattering, it does not go away;
without a scheduled purge the table, and its unique index that every paid request inserts into, grows forever.
"""
from __future__ import annotations

import logging

from celery import shared_task

from credits.idempotency import purge_expired

log = logging.getLogger(__name__)


@shared_task(name="credits.purge_expired_idempotency_keys")
def purge_expired_idempotency_keys() -> int:
    """Delete idempotency keys past their expiry (beat runs it every IDEMPOTENCY_PURGE_INTERVAL_S); live ones stay."""
    deleted = purge_expired()
    if deleted:
        log.info("purged %d expired idempotency key(s)", deleted)
    return deleted
