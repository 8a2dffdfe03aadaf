"""Stopping ingest and sync jobs: a cancel from the API or the admin, and the stop before a delete.

Why a flag and a wait, not a kill: a job stops itself between entries (search.ingest.job_control), so what it
wrote is whole. A cancel sets `cancel_requested`; a job no runner holds yet (pending, or running on a dead worker)
is marked `cancelled` at once, and its message, when a worker gets it, does nothing. A delete of a dataset or
project must not race a writer (a document inserted after the delete collected the rows is a foreign-key error),
so it asks every job of its datasets to stop and waits, bounded, until none has a live runner; past the bound it
answers 409 `jobs_running` and deletes nothing.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Collection
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.errors import Conflict, NotFound
from projects import policy
from projects.access import limit_to_key_projects
from search.ingest.jobs import ACTIVE
from search.ingest.locks import runner_alive
from search.models import IngestJob

if TYPE_CHECKING:
    from accounts.models import User

WAIT_POLL_S = 0.2
CANCELLED_TEXT = "job_cancelled: The job was cancelled before it ran."


def request_cancel(*, jobs: Collection[IngestJob | uuid.UUID | str]) -> list[str]:
    """Ask these jobs to stop; those no live runner holds end as cancelled now. -> ids of the jobs still running."""
    ids = [str(getattr(j, "pk", j)) for j in jobs]
    IngestJob.objects.filter(pk__in=ids, status__in=ACTIVE).update(cancel_requested=True)
    running = []
    for pk in IngestJob.objects.filter(pk__in=ids, status__in=ACTIVE).values_list("pk", flat=True):
        if runner_alive(pk):
            running.append(str(pk))
            continue
        # No runner: end it here. The runner takes the job lock before it marks the job running, and reads the
        # flag first, so a runner that starts meanwhile stops at once instead.
        IngestJob.objects.filter(pk=pk, status__in=ACTIVE).update(
            status=IngestJob.Status.CANCELLED, error=CANCELLED_TEXT, finished_at=timezone.now())
    return running


def cancel_job(*, user: User, job_id: uuid.UUID | str) -> IngestJob:
    """The API's and the admin's cancel: editors and owners of the job's project (staff for any project).

    404 `not_found` for a job the caller cannot see (another tenant's: existence does not leak), 409
    `job_finished` for one already done, failed or cancelled. The answer is the job as it is now: `cancelled`
    when it had not started, else still `running` with `cancel_requested` until it stops at its next entry."""
    jobs = IngestJob.objects.select_related("dataset__project").filter(pk=job_id)
    if not getattr(user, "is_staff", False):
        jobs = limit_to_key_projects(jobs.filter(dataset__project__memberships__user=user), user,
                                     "dataset__project_id")
    job = jobs.first()
    if job is None:
        raise NotFound("Ingest job not found.", field="job_id")
    policy.authorize("job.cancel", user=user, project=job.dataset.project, what="Ingest job")
    with transaction.atomic():
        job = IngestJob.objects.select_for_update().get(pk=job.pk)
        if job.status not in ACTIVE:
            raise Conflict(f"This job has already ended ({job.status}); there is nothing to cancel.",
                           code="job_finished", field="job_id", extra={"status": job.status})
    request_cancel(jobs=[job])
    job.refresh_from_db()
    return job


def stop_dataset_jobs(*, dataset_ids: Collection[int], wait_s: float | None = None) -> None:
    """Before a delete: cancel every active job of these datasets and wait (INGEST_CANCEL_WAIT_S) until none runs.

    Raises 409 `jobs_running` if one still runs at the bound; the jobs stay asked to stop, so a retry succeeds
    once they reach their next entry."""
    wait_s = settings.INGEST_CANCEL_WAIT_S if wait_s is None else wait_s
    jobs = list(IngestJob.objects.filter(dataset_id__in=list(dataset_ids), status__in=ACTIVE).values_list(
        "pk", flat=True))
    if not jobs:
        return
    running = request_cancel(jobs=jobs)
    deadline = time.monotonic() + wait_s
    while running:
        running = [pk for pk in running if runner_alive(pk)]
        if not running:
            return
        if time.monotonic() >= deadline:
            raise Conflict("An ingest or sync job of this dataset is still writing; it has been asked to stop. "
                           "Try again in a moment.", code="jobs_running", extra={"job_ids": running})
        time.sleep(WAIT_POLL_S)
