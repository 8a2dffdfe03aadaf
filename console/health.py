"""Dependency health: one function the /healthz view and `platform status` share.

Why two depths: a load balancer polls /healthz, so its checks must be cheap and bounded (one SQL statement, a Redis
PING, a read of the worker heartbeats, the state of this process's index handle: well under 100 ms together).
`platform status` is a person at a terminal who can wait a second for a worker ping and a point count.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection

from config.celery import app
from config.heartbeat import read, redis_client
from inference.encoders import describe_configuration, describe_devices
from search.engine.index import get_index, index_status


def _timed(fn: Callable[[], str | None]) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        detail = fn() or ""
        return {"ok": True, "ms": round((time.perf_counter() - t0) * 1000, 1), "detail": detail}
    except Exception as exc:  # noqa: BLE001 - health reports any failure
        return {"ok": False, "ms": round((time.perf_counter() - t0) * 1000, 1), "detail": f"{type(exc).__name__}: {exc}"}


def check_postgres() -> str:
    """One catalogue read: the server answers and the vector extension is installed."""
    with connection.cursor() as cur:
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cur.fetchone()
    return f"pgvector {row[0]}" if row else "pgvector extension missing"


def check_redis() -> str:
    redis_client().ping()
    return "pong"


def check_qdrant() -> str:
    """Whether this process's index is ready; never opens it (search.engine.index.index_status)."""
    return index_status()


def check_qdrant_deep() -> str:
    """Opens the index if this process holds none (loads the model: seconds) and counts its points."""
    return get_index().health()


def check_embeddings() -> str:
    """Resolves the model path, precision and devices without loading weights: a typo in EMBEDDING_MODEL or
    EMBEDDING_PRECISION, or EMBEDDING_DEVICE=cuda on a machine without a GPU, shows here before the first query
    fails on it. The detail says where batches and queries are encoded ("batches on cuda fp16, batch 256")."""
    return describe_configuration()


def check_worker() -> str:
    """A worker heartbeat younger than WORKER_HEARTBEAT_STALE_S (config/heartbeat.py): one Redis read, no ping."""
    beats = read()
    if not beats.live:
        last = (f"; the newest is {beats.newest_stale_age_s:.1f} s old" if beats.newest_stale_age_s is not None
                else "")
        raise RuntimeError(f"no Celery worker heartbeat within {settings.WORKER_HEARTBEAT_STALE_S:g} s{last}")
    youngest = min(age for _, age in beats.live)
    return f"{len(beats.live)} worker(s), last heartbeat {youngest:.1f} s ago"


def check_worker_ping() -> str:
    """A broadcast ping that waits up to a second for replies: for a person, not for a load balancer."""
    replies = app.control.ping(timeout=1.0) or []
    if not replies:
        raise RuntimeError("no Celery worker answered ping")
    return f"{len(replies)} worker(s) answered ping"


def health_report(*, include_worker: bool = True, deep: bool = False) -> dict[str, Any]:
    """{"ok", "checks": {name: {"ok", "ms", "detail"}}}. deep=False (the /healthz view) only does cheap reads;
    deep=True (`platform status`) also opens the index and pings the workers."""
    checks = {"postgres": _timed(check_postgres), "redis": _timed(check_redis),
              "qdrant": _timed(check_qdrant_deep if deep else check_qdrant),
              "embeddings": _timed(check_embeddings)}
    if checks["embeddings"]["ok"]:  # the devices as fields too (staff only, as every detail): device, precision, ...
        checks["embeddings"].update(describe_devices())
    if include_worker:
        checks["worker"] = _timed(check_worker_ping if deep else check_worker)
    return {"ok": all(c["ok"] for c in checks.values()), "checks": checks}
