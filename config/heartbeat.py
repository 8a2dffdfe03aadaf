"""Celery worker heartbeats in Redis, so /healthz can say "a worker is up" without asking one.

Why not `app.control.ping`: a ping is a broadcast that waits for replies (a second when no worker answers, and a
busy `--pool solo` worker cannot answer at all until its task ends), which a load balancer polling /healthz pays on
every probe. Instead each worker writes its own heartbeat from a daemon thread started on `worker_ready`: the thread
keeps beating while the worker's only thread runs a long task (solo pool, as the tests and `make run` use), and a
killed worker simply stops beating. Readers compare the newest beat with WORKER_HEARTBEAT_STALE_S.

Layout: one sorted set per task queue (member: "nodename:pid", score: Redis's clock at the beat), so every reader
and writer uses one clock whatever the machines' clocks say, and a reader needs one round trip.
"""
from __future__ import annotations

import logging
import math
import os
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis
from django.conf import settings

log = logging.getLogger(__name__)

KEY_PREFIX = "platform:worker-heartbeats:"


@dataclass(frozen=True)
class Heartbeats:
    """What a reader sees: the live workers (member, age in seconds) and the youngest stale one, if any."""

    live: list[tuple[str, float]]
    newest_stale_age_s: float | None


def heartbeat_key(*, queue: str | None = None) -> str:
    """Per task queue: a worker proves that the queue this deployment sends to is served."""
    return KEY_PREFIX + (queue or settings.CELERY_TASK_DEFAULT_QUEUE)


@lru_cache(maxsize=8)
def _client_for(url: str) -> Any:

    # one pool per URL and process: a probe reuses a connection instead of dialling Redis every time
    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1, health_check_interval=30)


def redis_client() -> Any:
    """The platform's Redis (settings.REDIS_URL, read at each call so a test's override applies)."""
    return _client_for(settings.REDIS_URL)


def _seconds(redis_time: tuple[int, int]) -> float:
    return redis_time[0] + redis_time[1] / 1_000_000


def beat(*, member: str, client: Any = None, key: str | None = None) -> float:
    """Record one heartbeat for `member` at Redis's clock and drop members long dead; returns the beat's time."""
    client = client or redis_client()
    key = key or heartbeat_key()
    now = _seconds(client.time())
    keep_s = max(settings.WORKER_HEARTBEAT_STALE_S, settings.WORKER_HEARTBEAT_S) * 10  # stale ones stay a while
    pipe = client.pipeline(transaction=False)
    pipe.zadd(key, {member: now})
    pipe.zremrangebyscore(key, "-inf", now - keep_s)
    pipe.expire(key, math.ceil(keep_s))
    pipe.execute()
    return now


def forget(*, member: str, client: Any = None, key: str | None = None) -> None:
    """A worker that shuts down cleanly removes its heartbeat: it is down at once, not after the staleness window."""
    (client or redis_client()).zrem(key or heartbeat_key(), member)


def read(*, stale_s: float | None = None, client: Any = None, key: str | None = None) -> Heartbeats:
    """The heartbeats younger than stale_s (default WORKER_HEARTBEAT_STALE_S): one pipelined round trip."""
    stale_s = settings.WORKER_HEARTBEAT_STALE_S if stale_s is None else stale_s
    pipe = (client or redis_client()).pipeline(transaction=False)
    pipe.time()
    pipe.zrange(key or heartbeat_key(), 0, -1, withscores=True)
    redis_time, members = pipe.execute()
    now = _seconds(redis_time)
    ages = [(m.decode() if isinstance(m, bytes) else str(m), max(0.0, now - score)) for m, score in members]
    live = sorted((m, age) for m, age in ages if age <= stale_s)
    stale = [age for _, age in ages if age > stale_s]
    return Heartbeats(live=live, newest_stale_age_s=min(stale) if stale else None)


class HeartbeatThread:
    """Beats every WORKER_HEARTBEAT_S until stopped; a Redis outage is logged once per streak and retried."""

    def __init__(self, *, member: str, interval_s: float | None = None) -> None:
        self.member = member
        # a floor, so a zero or negative setting cannot turn the thread into a loop hammering Redis
        self.interval_s = max(0.05, float(settings.WORKER_HEARTBEAT_S if interval_s is None else interval_s))
        self.key = heartbeat_key()  # fixed at start: the queue this worker was started for
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)

    def start(self) -> HeartbeatThread:
        self._thread.start()
        return self

    def stop(self, *, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                beat(member=self.member, key=self.key)
                if failing:
                    log.warning("worker heartbeat to Redis works again")
                failing = False
            except Exception as exc:  # noqa: BLE001 - keep beating; healthz reports the worker down meanwhile
                if not failing:
                    log.warning("worker heartbeat could not reach Redis (%r); retrying every %.1f s", exc,
                                self.interval_s)
                failing = True
            self._stop.wait(self.interval_s)


_running: HeartbeatThread | None = None
_running_lock = threading.Lock()


def start_worker_heartbeat(*, nodename: str) -> HeartbeatThread:
    """Start this worker process's heartbeat thread once (worker_ready; see config/celery.py)."""
    global _running
    with _running_lock:
        if _running is None:
            _running = HeartbeatThread(member=f"{nodename}:{os.getpid()}").start()
        return _running


def stop_worker_heartbeat() -> None:
    """Stop beating and remove this worker's heartbeat (worker_shutdown): a clean stop is down at once."""
    global _running
    with _running_lock:
        running, _running = _running, None
    if running is None:
        return
    running.stop()
    try:
        forget(member=running.member, key=running.key)
    except Exception as exc:  # noqa: BLE001 - Redis gone at shutdown: the heartbeat goes stale instead
        log.warning("could not remove the worker heartbeat at shutdown: %r", exc)
