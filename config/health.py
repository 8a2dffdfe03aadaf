"""Dependency health: one function the /healthz view and `platform status` share."""
from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import connection


def _timed(fn) -> dict[str, Any]:  # noqa: ANN001
    t0 = time.perf_counter()
    try:
        detail = fn() or ""
        return {"ok": True, "ms": round((time.perf_counter() - t0) * 1000, 1), "detail": detail}
    except Exception as exc:  # noqa: BLE001 - health reports any failure
        return {"ok": False, "ms": round((time.perf_counter() - t0) * 1000, 1), "detail": f"{type(exc).__name__}: {exc}"}


def check_postgres() -> str:
    with connection.cursor() as cur:
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cur.fetchone()
    return f"pgvector {row[0]}" if row else "pgvector extension missing"


def check_redis() -> str:
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    client.ping()
    return "pong"


def check_qdrant() -> str:
    from search.index import get_index

    return get_index().health()


def check_embeddings() -> str:
    """Resolves the model path and precision without loading weights: a typo in EMBEDDING_MODEL or
    EMBEDDING_PRECISION shows here before the first query fails on it."""
    from search.encoders import describe_configuration

    return describe_configuration()


def check_worker() -> str:
    from config.celery import app

    replies = app.control.ping(timeout=1.0) or []
    if not replies:
        raise RuntimeError("no Celery worker answered ping")
    return f"{len(replies)} worker(s)"


def health_report(*, include_worker: bool = True) -> dict[str, Any]:
    checks = {"postgres": _timed(check_postgres), "redis": _timed(check_redis), "qdrant": _timed(check_qdrant),
              "embeddings": _timed(check_embeddings)}
    if include_worker:
        checks["worker"] = _timed(check_worker)
    return {"ok": all(c["ok"] for c in checks.values()), "checks": checks}
