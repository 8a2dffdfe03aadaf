"""The ingest job lock: a session-level Postgres advisory lock keyed by the job id.

Why a leaf module: the runner takes the lock to run a job and recovery takes it to tell a dead runner from a
live one (search.ingest.recovery explains the scheme). Both import it from here, so neither module imports
the other and the lock's key space is defined once.
"""
from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

from django.db import connection, connections

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

# First key of the two-int advisory lock space: this application's ingest jobs.
LOCK_CLASS = 0x1A6E57


class JobBusy(RuntimeError):
    """Another live runner holds this job."""


def _lock_key(job_id: uuid.UUID | str) -> int:
    """A signed 32-bit key from the job's UUID (its low 32 bits)."""
    v = uuid.UUID(str(job_id)).int & 0xFFFFFFFF
    return v - (1 << 32) if v >= (1 << 31) else v


def _dedicated_connection() -> BaseDatabaseWrapper:
    """A connection of its own: the runner's transactions and connection resets never touch the lock."""
    conn = connections.create_connection("default")
    conn.ensure_connection()
    return conn


def _try_lock(conn: BaseDatabaseWrapper, job_id: uuid.UUID | str) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_CLASS, _lock_key(job_id)])
        return bool(cur.fetchone()[0])


@contextlib.contextmanager
def hold_job_lock(job_id: uuid.UUID | str, *, wait_s: float = 0.0) -> Iterator[bool]:
    """Hold the job's advisory lock for the block; yields False (and holds nothing) if another runner has it.

    `wait_s` rides out a recoverer's brief hold (one UPDATE) instead of mistaking it for a live runner.
    """
    conn = _dedicated_connection()
    try:
        deadline = time.monotonic() + wait_s
        got = _try_lock(conn, job_id)
        while not got and time.monotonic() < deadline:
            time.sleep(0.1)
            got = _try_lock(conn, job_id)
        yield got
    finally:
        conn.close()  # closing the session releases the lock


def runner_alive(job_id: uuid.UUID | str) -> bool:
    """True while some process holds the job's lock (i.e. is running it). Only looks: takes no lock."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 2)",
            [LOCK_CLASS, _lock_key(job_id) & 0xFFFFFFFF])
        return bool(cur.fetchone()[0])
