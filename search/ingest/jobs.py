"""Ingest jobs: create one, run it under its lock, or hand it to a worker; each job type registers its handler.

Why a registry: the runner must not know every kind of content. A job type (files of a code or web source,
rulebooks, pushed or uploaded content, a source sync) registers one handler here from its own module, and the
app imports those modules when it starts (search.apps), so adding a job type is one module and one line there.
Workers are reached by the task's name through the broker, not by importing the Celery module: the job layer
stays below the edge that defines the tasks (docs/architecture.md).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from config.errors import ApiError
from search.ingest.locks import JobBusy, hold_job_lock
from search.ingest.writer import Progress, apply_own_writes
from search.models import IngestJob, StagedContent

if TYPE_CHECKING:
    from accounts.models import User
    from projects.models import Dataset

log = logging.getLogger(__name__)

KINDS = ("code", "web", "rules")
# The Celery task that runs a job (search.tasks.run_ingest_job), named rather than imported: see the docstring.
RUN_JOB_TASK = "search.tasks.run_ingest_job"

Handler = Callable[..., Any]  # handler(*, job, progress) runs the job's work; the job's status is this module's
_HANDLERS: dict[str, Handler] = {}


def register(job_type: str) -> Callable[[Handler], Handler]:
    """Register the handler of a job type: an `origin` option ("sync", "push", "upload") or else a dataset kind."""
    def add(handler: Handler) -> Handler:
        if _HANDLERS.get(job_type, handler) is not handler:
            raise ValueError(f"job type {job_type!r} is already registered")
        _HANDLERS[job_type] = handler
        return handler
    return add


def job_type(job: IngestJob) -> str:
    """Which handler runs a job: its origin when it has one (a sync, a push, an upload), else its kind."""
    return str(job.options.get("origin") or job.kind)


def handler_for(job: IngestJob) -> Handler:
    try:
        return _HANDLERS[job_type(job)]
    except KeyError:
        raise LookupError(f"no handler registered for job type {job_type(job)!r} "
                          f"(registered: {', '.join(sorted(_HANDLERS)) or 'none'})") from None


def send(job_id: str) -> None:
    """Hand a job to a worker now (raises when the broker is down)."""
    current_app.send_task(RUN_JOB_TASK, args=[job_id])


def enqueue(job: IngestJob) -> None:
    """Hand a job to a worker once the transaction that created it commits."""
    job_id = str(job.pk)
    transaction.on_commit(lambda: send(job_id))


def run_job(*, job: IngestJob, progress: Progress | None = None) -> IngestJob:
    """Run (or resume) one IngestJob to completion. Safe to re-run after a crash.

    The job's advisory lock is held throughout: it is how a dead runner is told
    from a live one (search.ingest.locks, search.ingest.recovery), and it keeps a second delivery of
    the same job from running alongside. Raises JobBusy if a live runner has it.
    """
    with hold_job_lock(job.pk, wait_s=3.0) as got:
        if not got:
            raise JobBusy(f"ingest job {job.pk} is being run by another process")
        job.refresh_from_db()
        if job.status == IngestJob.Status.DONE:  # finished by an earlier delivery
            return job
        return _run_locked(job=job, progress=progress)


def _run_locked(*, job: IngestJob, progress: Progress | None) -> IngestJob:
    job.status = IngestJob.Status.RUNNING
    job.started_at = job.started_at or timezone.now()
    job.error = ""
    job.files_done = job.files_skipped = job.files_deleted = job.chunks_written = 0
    job.embeddings_computed = job.embeddings_cached = 0
    job.result = {}
    job.save()
    try:
        handler_for(job)(job=job, progress=progress)
        job.refresh_from_db()
        job.status = IngestJob.Status.DONE
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "finished_at"])
    except Exception as exc:
        IngestJob.objects.filter(pk=job.pk).update(status=IngestJob.Status.FAILED, error=job_error_text(exc),
                                                   finished_at=timezone.now())
        StagedContent.objects.filter(job_id=job.pk).delete()  # a failed job is not retried: free its bytes
        raise
    job.refresh_from_db()
    return job


def job_error_text(exc: BaseException) -> str:
    """What a failed job tells its owner: a code and a sentence, never an exception's text.

    An ApiError's own sentence (quota, archive, source) is written for the caller; anything else is internal and
    may name server paths or hosts (a FileExistsError naming the staging folder), so the owner gets a fixed sentence
    with a reference and the exception goes to the log under that reference."""
    if isinstance(exc, ApiError):
        return f"{exc.code}: {exc.detail}"
    ref = uuid.uuid4().hex[:12]
    log.error("ingest job failed [ref %s]", ref, exc_info=exc)
    return (f"internal_error: The job failed on the server. An operator can find the cause in "
            f"the server log under reference {ref}.")


def start_ingest(*, dataset: Dataset, source: str, kind: str, user: User | None = None,
                 options: dict[str, Any] | None = None, sync: bool = False, progress: Progress | None = None,
                 apply_index: bool = True) -> IngestJob:
    """The one entry point behind the command, the API and the admin action: create the job, run or enqueue.

    `sync=True` runs the job here and, unless `apply_index=False`, then applies its outbox to the index, so a
    caller that ingests and then queries reads its own writes (the writer applies; queries never do).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    job = IngestJob.objects.create(dataset=dataset, source=str(source), kind=kind, options=options or {},
                                   created_by=user if getattr(user, "pk", None) else None)
    if sync:
        job = run_job(job=job, progress=progress)
        if apply_index:
            apply_own_writes()
        return job
    enqueue(job)
    return job
