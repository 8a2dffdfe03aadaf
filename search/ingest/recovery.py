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

import logging

from search.ingest.jobs import send
from search.ingest.locks import hold_job_lock
from search.models import IngestJob

log = logging.getLogger(__name__)


def recover_stalled_ingests() -> list[str]:
    """Re-queue every running-but-dead job; returns their ids.

    The status flips running -> pending with a conditional update while we hold
    the job's lock, so two recoverers racing (two workers starting at once)
    enqueue it once. The message is sent after the lock is released, so the
    runner it wakes never finds the lock held by us.
    """
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
            send(str(job.pk))
        except Exception:
            # broker down: put it back as running-and-dead so the next recovery pass tries again
            IngestJob.objects.filter(pk=job.pk, status=IngestJob.Status.PENDING).update(
                status=IngestJob.Status.RUNNING)
            raise
        log.warning("ingest job %s was running on a worker that died (%d/%d files); re-queued to resume",
                    job.pk, job.files_done, job.files_total)
        requeued.append(str(job.pk))
    return requeued
