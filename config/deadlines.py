"""The request's deadline: one moment after which the work a request started stops, wherever it runs.

Why a context variable and not a timeout around the call: a web thread cannot be interrupted. A timer around a
view (or `anyio.move_on_after` around an MCP call) can stop waiting, but the work it waited for keeps the thread
and its CPU until its own end, and the answer comes only then. So the deadline rides with the request: the
middleware installs it for every API request (REQUEST_DEADLINE_S), the MCP endpoint for every tool call
(MCP_REQUEST_TIMEOUT_S), and the loops that can run long (grep's scan, reference resolution, the graph pack)
check it where they iterate. A loop that can hand back part of its answer stops and says so (`complete: false`);
one that cannot calls `check()`, and the request is answered 504 `request_timeout` at once.

A thread started for the work (an MCP tool off the event loop) runs in a copy of the caller's context
(`contextvars.copy_context().run`, which asgiref's sync_to_async does), so it sees the same deadline. Code with
no request around it (a command, a Celery task, a test calling a service) has no deadline: `remaining()` is None
and only the work's own budgets apply.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

from config.errors import ApiError

_deadline: ContextVar[float | None] = ContextVar("request_deadline", default=None)


class DeadlineExceeded(ApiError):
    """The request's deadline passed inside work that cannot return part of its answer: 504 `request_timeout`."""

    status_code = 504
    code = "request_timeout"


def now() -> float:
    return time.monotonic()


@contextlib.contextmanager
def deadline_after(seconds: float) -> Iterator[float]:
    """Run the block under a deadline `seconds` from now, or under the one already set if that is sooner (a tool
    call inside a request never outlives the request). Yields the deadline (a `time.monotonic()` value)."""
    at = now() + max(0.0, float(seconds))
    outer = _deadline.get()
    if outer is not None:
        at = min(at, outer)
    token = _deadline.set(at)
    try:
        yield at
    finally:
        _deadline.reset(token)


def current() -> float | None:
    """The deadline in force (a `time.monotonic()` value), or None outside a request."""
    return _deadline.get()


def remaining() -> float | None:
    """Seconds left before the deadline (0 when passed), or None outside a request."""
    at = _deadline.get()
    return None if at is None else max(0.0, at - now())


def budget(*, seconds: float) -> float:
    """The moment a piece of work with its own budget must stop: `seconds` from now, or the request's deadline if
    that comes first."""
    at = now() + max(0.0, float(seconds))
    outer = _deadline.get()
    return at if outer is None else min(at, outer)


def passed(at: float | None = None) -> bool:
    """Whether `at` (default: the request's deadline) has passed; never, outside a request and without `at`."""
    at = _deadline.get() if at is None else at
    return at is not None and now() >= at


def check() -> None:
    """Raise DeadlineExceeded (504 `request_timeout`) once the request's deadline has passed."""
    if passed():
        raise DeadlineExceeded("The request did not finish within its time budget; it was stopped.")
