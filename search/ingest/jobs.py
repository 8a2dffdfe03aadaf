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
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from config.errors import ApiError
from config.gcpolicy import bulk_work
from search.ingest.job_control import JobCancelled, checking, job_budget
from search.ingest.locks import JobBusy, hold_job_lock, runner_alive
from search.ingest.writer import Progress, apply_own_writes
from search.models import IngestJob, StagedContent

if TYPE_CHECKING:
    from accounts.models import User

log = logging.getLogger(__name__)

KINDS = ("code", "web", "rules")
# The Celery task that runs a job (search.tasks.run_ingest_job), named rather than imported: see the docstring.
RUN_JOB_TASK = "search.tasks.run_ingest_job"

ACTIVE = (IngestJob.Status.PENDING, IngestJob.Status.RUNNING)
FINISHED = (IngestJob.Status.DONE, IngestJob.Status.CANCELLED)  # a later delivery of the job does nothing
# what a runner may (re)start: a failed job too, as a Celery retry of a failed ingest re-runs it
RUNNABLE = (*ACTIVE, IngestJob.Status.FAILED)
# First keys of the two-int advisory lock spaces that serialise the slot claims of one tenant (see _claim_slot): the
# account that created the project, or the project itself where none is recorded.
SLOT_LOCK_CLASS = 0x1A6E58
SLOT_LOCK_CLASS_ACCOUNT = 0x1A6E59

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


class NoSlot(RuntimeError):
    """The job's tenant already runs as many jobs as it may (INGEST_TENANT_MAX_RUNNING): offer it again later."""


def run_job(*, job: IngestJob, progress: Progress | None = None, claim_slot: bool = False) -> IngestJob:
    """Run (or resume) one IngestJob to completion. Safe to re-run after a crash.

    The job's advisory lock is held throughout: it is how a dead runner is told
    from a live one (search.ingest.locks, search.ingest.recovery), and it keeps a second delivery of
    the same job from running alongside. Raises JobBusy if a live runner has it.

    `claim_slot` (a worker picking the job up): the job runs only if its project has a free slot (`claim_slot`),
    else NoSlot is raised and the job stays pending. The job ends within INGEST_JOB_MAX_S, or at a cancel,
    at the next entry it reads (search.ingest.job_control), raising JobStopped.
    """
    with hold_job_lock(job.pk, wait_s=3.0) as got:
        if not got:
            raise JobBusy(f"ingest job {job.pk} is being run by another process")
        job.refresh_from_db()
        if job.status in FINISHED:  # finished (or cancelled) by an earlier delivery
            return job
        if claim_slot and not _claim_slot(job=job):
            raise NoSlot(f"the tenant of project {job.dataset.project_id} runs as many ingest jobs as it may")
        return _run_locked(job=job, progress=progress)


def _claim_slot(*, job: IngestJob) -> bool:
    """Whether the job may run now: fewer than INGEST_TENANT_MAX_RUNNING jobs of its tenant have a live runner.

    A tenant is the account that created the job's project (every project of one account counts together, so an
    account cannot fill the workers by spreading its syncs over projects), or the project itself where no creator
    is recorded (projects made before creators were recorded, or whose creator was deleted).
    Why a count under an advisory lock in Postgres, not a counter in the worker: workers are processes (and hosts);
    the database is what they share. Claims of one tenant are serialised by a transaction-level lock, and a job
    counts while its runner holds its job lock (search.ingest.locks), so a dead worker's job frees its slot at once.
    The caller holds this job's lock, so the job is marked running before the claim's lock is released."""
    project = job.dataset.project
    if project.created_by_id is not None:
        lock_key = (SLOT_LOCK_CLASS_ACCOUNT, int(project.created_by_id) % 2147483647)
        tenant_jobs = IngestJob.objects.filter(dataset__project__created_by_id=project.created_by_id)
    else:
        lock_key = (SLOT_LOCK_CLASS, int(project.pk) % 2147483647)
        tenant_jobs = IngestJob.objects.filter(dataset__project_id=project.pk)
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", list(lock_key))
        others = (tenant_jobs.filter(status=IngestJob.Status.RUNNING)
                  .exclude(pk=job.pk).values_list("pk", flat=True))
        busy = sum(1 for pk in others if runner_alive(pk))
        if busy >= max(1, settings.INGEST_TENANT_MAX_RUNNING):
            return False
        IngestJob.objects.filter(pk=job.pk, status__in=RUNNABLE).update(status=IngestJob.Status.RUNNING)
    return True


def _run_locked(*, job: IngestJob, progress: Progress | None) -> IngestJob:
    started = IngestJob.objects.filter(pk=job.pk, status__in=RUNNABLE).update(
        status=IngestJob.Status.RUNNING, started_at=job.started_at or timezone.now(), error="", files_done=0,
        files_skipped=0, files_deleted=0, chunks_written=0, embeddings_computed=0, embeddings_cached=0, result={})
    if not started:  # cancelled while it waited for this runner
        job.refresh_from_db()
        return job
    job.refresh_from_db()
    with job_budget(job_id=str(job.pk)) as budget, bulk_work():  # the collector's bulk policy (config/gcpolicy.py)
        try:
            budget.check()  # a cancel asked while the job was queued
            handler_for(job)(job=job, progress=checking(progress))
            job.refresh_from_db()
            job.status = IngestJob.Status.DONE
            job.finished_at = timezone.now()
            job.save(update_fields=["status", "finished_at"])
        except Exception as exc:
            ended = IngestJob.Status.CANCELLED if isinstance(exc, JobCancelled) else IngestJob.Status.FAILED
            IngestJob.objects.filter(pk=job.pk).update(status=ended, error=job_error_text(exc),
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


def start_ingest(*, job: IngestJob, user: User | None = None, sync: bool = False, progress: Progress | None = None,
                 apply_index: bool = True) -> IngestJob:
    """The one entry point behind the command, the API and the admin action: create the job, run or enqueue.

    `job`: the ingest as asked, unsaved: its dataset, source, kind and options, the row this stores (and the
    worker reads back). `user` becomes its created_by when it is a stored account (not an anonymous caller).
    `sync=True` runs the job here and, unless `apply_index=False`, then applies its outbox to the index, so a
    caller that ingests and then queries reads its own writes (the writer applies; queries never do).
    """
    if job.kind not in KINDS:
        raise ValueError(f"unknown kind {job.kind!r}")
    job.source, job.options = str(job.source), job.options or {}
    job.created_by = user if getattr(user, "pk", None) else None
    job.save(force_insert=True)
    if sync:
        job = run_job(job=job, progress=progress)
        if apply_index:
            apply_own_writes()
        return job
    enqueue(job)
    return job
