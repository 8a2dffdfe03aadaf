"""Celery tasks: ingestion, the outbox applier (server Qdrant only), query-metric aggregation.

Why the applier is conditional: an embedded Qdrant store admits one open
handle, owned by the web process; a worker must never open it.
"""
from __future__ import annotations

import logging
from datetime import date, timedelta
from typing import TYPE_CHECKING

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from search.engine.applier import apply_outbox, rebuild
from search.ingest.job_control import JobStopped
from search.ingest.jobs import FINISHED, NoSlot, run_job
from search.ingest.locks import JobBusy
from search.ingest.recovery import recover_stalled_ingests
from search.models import IngestJob
from search.quality.online import aggregate_day
from search.quality.schedule import enqueue_due_adaptations as enqueue_adaptations
from search.sources.sync import enqueue_due_syncs as enqueue

if TYPE_CHECKING:
    from celery import Task

log = logging.getLogger(__name__)


@shared_task(bind=True, autoretry_for=(Exception,), retry_backoff=2, retry_kwargs={"max_retries": 3},
             acks_late=True)
def run_ingest_job(self: Task, job_id: str) -> dict:
    """Run or resume an IngestJob; a retry re-runs it and skips what earlier attempts committed.

    A job killed with its worker is re-queued by `recover_ingest_jobs` (search.ingest.recovery).
    """
    job = IngestJob.objects.select_related("dataset").filter(pk=job_id).first()
    if job is None:  # its dataset was deleted while the job waited
        return {"status": "gone"}
    if job.status in FINISHED:
        return {"status": job.status}
    try:
        job = run_job(job=job, claim_slot=True)
    except JobBusy:  # a live runner has it (e.g. a redelivered message): nothing to do here
        return {"status": "busy"}
    except NoSlot:
        # Its project's jobs hold every slot it may use: the job stays pending and is offered again later, so this
        # worker slot goes to another project's job now (docs/security.md, "Jobs that end and share the workers").
        run_ingest_job.apply_async(args=[job_id], countdown=settings.INGEST_SLOT_RETRY_S)
        return {"status": "waiting"}
    except (JobStopped, IngestJob.DoesNotExist):
        # Timed out or cancelled (recorded on the job), or deleted with its dataset: running it again would not help.
        return {"status": "stopped"}
    except Exception:
        if job.options.get("origin") == "sync":
            # A failed sync is already recorded on its job and its Source (error, back-off); its schedule retries
            # it. A Celery retry would run it again at once and count each attempt as another failure.
            return {"status": "failed"}
        raise
    if settings.QDRANT_URL:
        apply_index_outbox.delay()
    return {"status": job.status, "chunks": job.chunks_written}


@shared_task
def recover_ingest_jobs() -> list[str]:
    """Re-queue ingest jobs whose worker died mid-run (on every worker start, and from beat)."""
    return recover_stalled_ingests()


@worker_ready.connect
def _recover_on_worker_start(sender: object = None, **kwargs: object) -> None:
    """A (re)started worker picks up what a killed one dropped, without waiting for the broker's visibility timeout."""
    try:
        recover_ingest_jobs.delay()
    except Exception:
        log.exception("could not queue ingest recovery at worker start")


@shared_task
def apply_index_outbox() -> int:
    """With a Qdrant server the applier runs here (after each ingest, and from beat as a backstop); with the
    embedded store it is a no-op: the web process owns the store and its applier thread applies."""
    if not settings.QDRANT_URL:
        return 0

    return apply_outbox()


@shared_task
def aggregate_query_metrics(day: str | None = None) -> int:
    """MRR@10 and nDCG@10 per project per day from judged sessions (ranx), into DailyMetric."""
    days = [date.fromisoformat(day)] if day else [date.today() - timedelta(days=1), date.today()]
    return sum(aggregate_day(day=d) for d in days)


@shared_task(acks_late=True)
def reindex_collection() -> dict:
    """Rebuild a Qdrant server's collection from Postgres (the embedded store rebuilds in its owner process)."""
    return rebuild() if settings.QDRANT_URL else {}


@shared_task
def enqueue_due_adaptations() -> list[str]:
    """Beat's hook for re-adaptation: a project whose history grew enough gets a pending adaptation job, which the
    web process runs (search/quality/schedule.py)."""
    return enqueue_adaptations()


@shared_task
def enqueue_due_syncs() -> list[str]:
    """Beat's hook for scheduled sources: each due source gets one sync job (search/sources/sync.py)."""
    return enqueue()
