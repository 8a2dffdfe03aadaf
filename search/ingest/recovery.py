"""Ingest jobs survive a worker that dies mid-run (SIGKILL, OOM, power loss).

The problem: with the Redis broker and acks_late, the message of a task whose
worker was killed stays "unacked" and is redelivered only after the broker's
visibility_timeout (1 h by default). Meanwhile the IngestJob says "running"
forever. Shortening visibility_timeout is not a fix: a healthy ingest longer
than the timeout would be delivered a second time and run twice at once.

What we do instead:

* **Liveness is a Postgres advisory lock, not a heartbeat.** `run_job` holds a
  session-level advisory lock keyed by the job id, on a connection of its own,
  for as long as it runs. When the process dies, its connection closes and
  Postgres releases the lock, in milliseconds and with no clock involved.
  "Running, and its lock is free" therefore means exactly "the runner is dead":
  no heartbeat interval to tune, no false positive for a slow embedding batch,
  and it covers every runner (Celery task, `manage.py ingest`, admin action).
  The same lock makes a second runner of the same job (a redelivered message,
  a double requeue) step aside instead of working in parallel.
* **Recovery is automatic.** `recover_stalled_ingests()` re-queues every such
  job; it runs when any worker starts (`worker_ready`, so a restarted worker
  picks up what its predecessor dropped) and periodically from beat (so a
  surviving worker picks up a dead sibling's job). Re-queueing is always safe:
  the runner skips a DONE job, steps aside when the lock is held, and is
  idempotent, so an extra message costs one no-op.
* **The runner resumes rather than restarts.** `write_documents` commits whole
  file batches (chunks, cached vectors and index outbox in one transaction), so
  a killed batch leaves nothing behind; on the re-run a file whose content hash
  is already stored is skipped, and a re-written path has its old chunks
  deleted first (with index deletes queued). The result: exactly the chunks and
  points a clean run produces — nothing lost, nothing duplicated.

Caveat: with Postgres reached over TCP, a runner's host that vanishes without
closing its socket keeps the lock until the server's TCP keepalive gives up
(tune `tcp_keepalives_*`); a killed process on a live host is detected at once.
"""
from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator

log = logging.getLogger(__name__)

# First key of the two-int advisory lock space: this application's ingest jobs.
LOCK_CLASS = 0x1A6E57


class JobBusy(RuntimeError):
    """Another live runner holds this job."""


def _lock_key(job_id: uuid.UUID | str) -> int:
    """A signed 32-bit key from the job's UUID (its low 32 bits)."""
    v = uuid.UUID(str(job_id)).int & 0xFFFFFFFF
    return v - (1 << 32) if v >= (1 << 31) else v


def _dedicated_connection():  # noqa: ANN202
    """A connection of its own: the runner's transactions and connection resets never touch the lock."""
    from django.db import connections

    conn = connections.create_connection("default")
    conn.ensure_connection()
    return conn


def _try_lock(conn, job_id) -> bool:  # noqa: ANN001
    with conn.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_CLASS, _lock_key(job_id)])
        return bool(cur.fetchone()[0])


@contextlib.contextmanager
def hold_job_lock(job_id, *, wait_s: float = 0.0) -> Iterator[bool]:  # noqa: ANN001
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


def runner_alive(job_id) -> bool:  # noqa: ANN001
    """True while some process holds the job's lock (i.e. is running it). Only looks: takes no lock."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 2)",
            [LOCK_CLASS, _lock_key(job_id) & 0xFFFFFFFF])
        return bool(cur.fetchone()[0])


def recover_stalled_ingests() -> list[str]:
    """Re-queue every running-but-dead job; returns their ids.

    The status flips running -> pending with a conditional update while we hold
    the job's lock, so two recoverers racing (two workers starting at once)
    enqueue it once. The message is sent after the lock is released, so the
    runner it wakes never finds the lock held by us.
    """
    from search.models import IngestJob
    from search.tasks import run_ingest_job

    requeued = []
    for job in IngestJob.objects.filter(status=IngestJob.Status.RUNNING).order_by("created_at"):
        with hold_job_lock(job.pk) as got:
            if not got:
                continue  # a live runner has it
            n = IngestJob.objects.filter(pk=job.pk, status=IngestJob.Status.RUNNING).update(
                status=IngestJob.Status.PENDING)
        if not n:
            continue
        try:
            run_ingest_job.delay(str(job.pk))
        except Exception:
            # broker down: put it back as running-and-dead so the next recovery pass tries again
            IngestJob.objects.filter(pk=job.pk, status=IngestJob.Status.PENDING).update(
                status=IngestJob.Status.RUNNING)
            raise
        log.warning("ingest job %s was running on a worker that died (%d/%d files); re-queued to resume",
                    job.pk, job.files_done, job.files_total)
        requeued.append(str(job.pk))
    return requeued
