"""A dataset's source: set it, sync it now or on schedule, and run a sync job.

Why syncs are ingest jobs: a sync has what every ingest has (progress, counters, errors, a worker that may
die half-way, recovery that re-queues it), so it is an IngestJob with options.origin == "sync" and runs
through search.ingest.runner.run_job under the job lock. What a sync adds is kept on the Source row: the
commit (git) the dataset reflects, the schedule, the last error. The row is updated only when a sync ends,
so a sync killed half-way is re-run from the same starting point: what it already wrote is skipped by
content hash, nothing is embedded twice and nothing is lost.

One sync per dataset at a time: starting one locks the Source row and refuses (409) while another is pending
or running; the scheduler skips such datasets.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from config.errors import Conflict, Forbidden, NotFound
from projects.access import membership_role
from projects.models import Membership
from search.sources import secrets
from search.sources.spec import SourceSpec, display_url

if TYPE_CHECKING:
    from accounts.models import User
    from projects.models import Dataset
    from search.ingest.progress import Progress
    from search.models import IngestJob, Source

log = logging.getLogger(__name__)

WRITERS = frozenset({Membership.Role.OWNER, Membership.Role.EDITOR})
ACTIVE = ("pending", "running")
MAX_BACKOFF_S = 24 * 3600


def _require_writer(*, user: User | None, dataset: Dataset) -> None:
    if user is None:
        return  # the scheduler, a command
    role = membership_role(user=user, project=dataset.project)
    if role is None and not user.is_staff:
        raise NotFound("Dataset not found.")
    if role not in WRITERS and not user.is_staff:
        raise Forbidden("Only owners and editors of this project can change its sources.")


def set_source(*, user: User | None, dataset: Dataset, spec: SourceSpec, interval_s: int | None,
               token: str | None = None) -> Source:
    """Create or replace the dataset's source. `token`: None keeps the stored one, "" clears it.

    A changed URL or ref forgets the commit the dataset reflected, so the next sync compares the whole tree
    by content hash (nothing unchanged is re-embedded, files the new tree lacks are deleted)."""
    from search.models import Source

    _require_writer(user=user, dataset=dataset)
    with transaction.atomic():
        source = Source.objects.select_for_update().filter(dataset=dataset).first()
        if source is None:
            source = Source(dataset=dataset, created_by=user if getattr(user, "pk", None) else None)
        elif source.type != spec.type or source.config.get("url") != spec.config.get("url") \
                or source.config.get("ref") != spec.config.get("ref") \
                or source.config.get("subdir") != spec.config.get("subdir"):
            source.state = {}
        source.type, source.config, source.interval_s = spec.type, spec.config, interval_s
        if token is not None:
            source.secret = secrets.encrypt(token)
        source.next_sync_at = timezone.now() if interval_s else None
        source.save()
    return source


def remove_source(*, user: User | None, dataset: Dataset) -> None:
    """The dataset stops following its source; its documents stay (delete them, or the dataset, to drop them)."""
    from search.models import Source

    _require_writer(user=user, dataset=dataset)
    deleted, _ = Source.objects.filter(dataset=dataset).delete()
    if not deleted:
        raise NotFound("This dataset has no source.", code="no_source")


def active_sync(dataset: Dataset) -> IngestJob | None:
    from search.models import IngestJob

    return IngestJob.objects.filter(dataset=dataset, options__origin="sync", status__in=ACTIVE).first()


def start_sync(*, dataset: Dataset, user: User | None = None, trigger: str = "manual", run_now: bool = False,
               progress: Progress | None = None) -> IngestJob:
    """Queue (or with `run_now`, run here) a sync of the dataset's source; 409 while one is pending or running."""
    from search.ingest.runner import apply_own_writes, run_job, start_ingest
    from search.models import IngestJob, Source

    _require_writer(user=user, dataset=dataset)
    with transaction.atomic():
        source = Source.objects.select_for_update().filter(dataset=dataset).first()
        if source is None:
            raise NotFound("This dataset has no source; set one first.", code="no_source")
        running = active_sync(dataset)
        if running is not None:
            raise Conflict("A sync of this dataset is already queued or running.", code="sync_running",
                           extra={"job_id": str(running.pk)})
        options = {"origin": "sync", "trigger": trigger, "source_type": source.type}
        where = display_url(source.type, source.config)
        if run_now:  # created here, run below once the row lock is released
            job = IngestJob.objects.create(dataset=dataset, source=where, kind=dataset.kind, options=options,
                                           created_by=user if getattr(user, "pk", None) else None)
        else:  # the worker is told on commit
            job = start_ingest(dataset=dataset, source=where, kind=dataset.kind, user=user, options=options)
    if run_now:
        job = run_job(job=job, progress=progress)
        apply_own_writes()
    return job


def run_sync(*, job: IngestJob, progress: Progress | None = None) -> dict[str, Any]:
    """Run one sync job (called by the runner under the job lock); record its outcome on the Source row."""
    from search.models import Source

    source = Source.objects.filter(dataset_id=job.dataset_id).first()
    if source is None:
        raise LookupError("the dataset's source was removed before its sync ran")
    try:
        if source.type == Source.Type.GIT:
            from search.sources.gitsync import sync_git

            state = sync_git(job=job, source=source, progress=progress)
        else:
            from search.sources.crawler import crawl_site

            state = crawl_site(job=job, source=source, progress=progress)
    except Exception as exc:
        _record(source_id=source.pk, error=exc)
        raise
    _record(source_id=source.pk, state=state)
    return state


def _record(*, source_id: int, state: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
    """The outcome of a sync on its Source: state and schedule on success; error and back-off on failure."""
    from search.ingest.runner import job_error_text
    from search.models import Source

    now = timezone.now()
    with transaction.atomic():
        source = Source.objects.select_for_update().filter(pk=source_id).first()
        if source is None:
            return
        source.last_sync_at = now
        if error is None:
            source.state = state or {}
            source.last_success_at = now
            source.last_error = ""
            source.consecutive_failures = 0
        else:
            source.last_error = job_error_text(error)[:2000]
            source.consecutive_failures += 1
        source.next_sync_at = next_sync_time(source=source, now=now)
        source.save()


def next_sync_time(*, source: Source, now: datetime) -> datetime | None:
    """interval after the last sync; after failures, doubled each time (capped at a day) so a broken source
    does not hammer its host or fill the job list."""
    if not source.interval_s:
        return None
    delay = source.interval_s * (2 ** min(source.consecutive_failures, 10))
    return now + timedelta(seconds=min(delay, max(MAX_BACKOFF_S, source.interval_s)))


def enqueue_due_syncs(*, now: datetime | None = None) -> list[str]:
    """Start a sync for every scheduled source that is due and not already syncing; -> job ids.

    Rows are claimed with SKIP LOCKED and their next_sync_at pushed forward in the same transaction, so two
    beat runs (or two schedulers) never queue the same sync twice."""
    from search.ingest.runner import start_ingest
    from search.models import Source

    now = now or timezone.now()
    started = []
    with transaction.atomic():
        due = (Source.objects.select_for_update(skip_locked=True, of=("self",)).select_related("dataset")
               .filter(interval_s__isnull=False, next_sync_at__lte=now).order_by("next_sync_at")[:100])
        for source in due:
            if active_sync(source.dataset) is not None:
                continue
            job = start_ingest(dataset=source.dataset, source=display_url(source.type, source.config),
                               kind=source.dataset.kind,
                               options={"origin": "sync", "trigger": "schedule", "source_type": source.type})
            source.next_sync_at = now + timedelta(seconds=source.interval_s or 0)
            source.save(update_fields=["next_sync_at", "updated_at"])
            started.append(str(job.pk))
    if started:
        log.info("sources: queued %d scheduled syncs", len(started))
    return started


def sync_history(*, dataset: Dataset, limit: int = 50) -> list[IngestJob]:
    from search.models import IngestJob

    return list(IngestJob.objects.filter(dataset=dataset, options__origin="sync").order_by("-created_at")[:limit])


def source_token(source: Source) -> str:
    """The decrypted token for the fetcher; never for a response or a log line."""
    return secrets.decrypt(source.secret)
