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
