"""Per-user rate limits on the Redis cache (django-ratelimit), raised as 429 with Retry-After."""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from django.conf import settings
from django_ratelimit import ALL
from django_ratelimit.core import get_usage

from config.errors import DependencyDown, RateLimited

if TYPE_CHECKING:
    from django.http import HttpRequest
    from rest_framework.request import Request

log = logging.getLogger(__name__)
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _period_seconds(rate: str) -> int:
    unit = rate.split("/", 1)[1]
    digits = "".join(c for c in unit if c.isdigit())
    return (int(digits) if digits else 1) * _PERIODS[unit[-1].lower()]


def enforce(request: HttpRequest | Request, *, group: str) -> None:
    """Count this request against the caller's budget for `group`; raise RateLimited when over."""
    if not settings.RATELIMIT_ENABLE:
        return
    rate = settings.RATE_LIMITS.get(group, settings.RATE_LIMITS["default"])
    try:
        usage = get_usage(request, group=f"rl:{group}", key="user_or_ip", rate=rate, method=ALL, increment=True)
    except Exception as exc:
        # Fail closed: these limits guard paid and expensive endpoints, so without the counter we refuse
        # (a 503 naming redis, before any work or charge) rather than serve them unlimited.
        log.warning("rate-limit cache unavailable for %s: %s", group, exc)
        raise DependencyDown("redis", "The rate-limit cache (redis) is unavailable; try again shortly.") from exc
    if usage and usage["should_limit"]:
        retry = max(1, int(usage.get("time_left") or _period_seconds(rate) - int(time.time()) % _period_seconds(rate)))
        raise RateLimited(f"Rate limit {rate} exceeded for {group}.", headers={"Retry-After": str(retry)},
                          extra={"retry_after": retry})


def _usage_of(request: HttpRequest | Request, *, group: str, key: str, increment: bool) -> dict | None:
    """django-ratelimit's usage of `group`'s bucket named `key` (fail closed like enforce: 503 naming redis)."""
    rate = settings.RATE_LIMITS.get(group, settings.RATE_LIMITS["default"])
    try:
        return get_usage(request, group=f"rl:{group}", key=lambda _group, _request: key, rate=rate, method=ALL,
                         increment=increment)
    except Exception as exc:
        log.warning("rate-limit cache unavailable for %s: %s", group, exc)
        raise DependencyDown("redis", "The rate-limit cache (redis) is unavailable; try again shortly.") from exc


def _refuse(*, group: str, usage: dict) -> None:
    """RateLimited with Retry-After: the window's end is its last whole second, so the bucket frees one later."""
    rate = settings.RATE_LIMITS.get(group, settings.RATE_LIMITS["default"])
    left = usage.get("time_left")
    retry = max(1, int(left) + 1 if left is not None else _period_seconds(rate))
    raise RateLimited(f"Rate limit {rate} exceeded for {group}.", headers={"Retry-After": str(retry)},
                      extra={"retry_after": retry})


def enforce_key(request: HttpRequest | Request, *, group: str, key: str) -> None:
    """Like enforce, but the bucket is `key` rather than the caller: e.g. a digest of the address a request
    names, so one address is limited however many callers share the work. Counts, then raises RateLimited when
    over."""
    if not settings.RATELIMIT_ENABLE:
        return
    usage = _usage_of(request, group=group, key=key, increment=True)
    if usage and usage["should_limit"]:
        _refuse(group=group, usage=usage)


def check_key(request: HttpRequest | Request, *, group: str, key: str) -> None:
    """RateLimited when `key`'s bucket in `group` is already full; counts nothing. With count_key it limits
    events that are known only after the work (failed logins), where enforce would count every attempt."""
    if not settings.RATELIMIT_ENABLE:
        return
    usage = _usage_of(request, group=group, key=key, increment=False)
    if usage and usage["count"] >= usage["limit"]:
        _refuse(group=group, usage=usage)


def count_key(request: HttpRequest | Request, *, group: str, key: str) -> None:
    """Count one event in `key`'s bucket of `group` without refusing anything (check_key refuses the next)."""
    if settings.RATELIMIT_ENABLE:
        _usage_of(request, group=group, key=key, increment=True)
