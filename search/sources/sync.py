"""A dataset's source: set it, sync it now or on schedule, and run a sync job.

Why syncs are ingest jobs: a sync has what every ingest has (progress, counters, errors, a worker that may
die half-way, recovery that re-queues it), so it is an IngestJob with options.origin == "sync" and runs
through search.ingest.jobs.run_job under the job lock. What a sync adds is kept on the Source row: the
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

from config.errors import BadInput, Conflict, NotFound
from projects import policy
from search.ingest.cancel import request_cancel
from search.ingest.jobs import job_error_text, register, run_job, start_ingest
from search.ingest.maintenance import last_ingest
from search.ingest.sharing import create_dataset
from search.ingest.writer import apply_own_writes
from search.models import IngestJob, Source
from search.sources import secrets
from search.sources.registry import source_type
from search.sources.spec import SourceSpec, display_url, parse_interval, parse_source, parse_token

if TYPE_CHECKING:
    from accounts.models import User
    from search.ingest.progress import Progress
    from search.models import Dataset, IngestJob, Source

log = logging.getLogger(__name__)

ACTIVE = ("pending", "running")
MAX_BACKOFF_S = 24 * 3600


def _require_writer(*, user: User | None, dataset: Dataset) -> None:
    if user is None:
        return  # the scheduler, a command
    policy.authorize("source.write", user=user, project=dataset.project, what="Dataset")


def set_source(*, user: User | None, dataset: Dataset, spec: SourceSpec, interval_s: int | None,
               token: str | None = None) -> Source:
    """Create or replace the dataset's source. `token`: None keeps the stored one, "" clears it.

    A changed URL or ref forgets the commit the dataset reflected, so the next sync compares the whole tree
    by content hash (nothing unchanged is re-embedded, files the new tree lacks are deleted)."""
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


def configure_source(*, user: User | None, dataset: Dataset, raw: Any, interval_s: Any = None,
                     token: Any = None) -> Source:
    """Check a source as sent (the API body, the page's form, the admin) whole, then set it.

    Why one entry for every door: the same input must be refused the same way, with the same `field`, whether it
    came from the API, the dataset page or the admin; nothing is stored unless all of it is valid."""
    _require_writer(user=user, dataset=dataset)
    spec = parse_source(raw, user=user, dataset_kind=dataset.kind)
    return set_source(user=user, dataset=dataset, spec=spec, interval_s=parse_interval(interval_s),
                      token=parse_token(token))


def create_dataset_with_source(*, user: User, new: Dataset, source: Any = None, interval_s: Any = None,
                               token: Any = None) -> Dataset:
    """Create a dataset that may follow a source from the start: the dataset and its source commit together.

    `new`: the dataset as asked, unsaved (its project, name, kind, description, is_global), the row the request
    describes; it is checked and created by create_dataset, which returns the stored row.
    The source is checked before anything is created, so a bad one leaves no dataset behind (and its name stays
    free for the corrected request)."""
    project, kind = new.project, new.kind
    if source is None:
        if interval_s is not None or token:
            raise BadInput("interval_s and token describe a source; send `source` too.",
                           field="interval_s" if interval_s is not None else "token")
        return create_dataset(user=user, project=project, name=new.name, kind=kind, description=new.description,
                              is_global=new.is_global)
    policy.authorize("dataset.create", user=user, project=project)
    spec = parse_source(source, user=user, dataset_kind=kind)
    interval, secret = parse_interval(interval_s), parse_token(token)
    with transaction.atomic():
        dataset = create_dataset(user=user, project=project, name=new.name, kind=kind, description=new.description,
                                 is_global=new.is_global)
        set_source(user=user, dataset=dataset, spec=spec, interval_s=interval, token=secret)
    return dataset


def source_of(dataset: Dataset) -> Source | None:
    return Source.objects.filter(dataset=dataset).first()


def describe_source(*, dataset: Dataset) -> dict[str, Any] | None:
    """The dataset's source as the API, the pages and the admin show it: whether a token is stored, never the
    token; the commit the dataset reflects; the schedule and the last error; the sync now queued or running."""
    source = source_of(dataset)
    if source is None:
        return None
    active = active_sync(dataset)
    state = source.state or {}
    return {
        "type": source.type, "config": source.config, "url": display_url(source.type, source.config),
        "interval_s": source.interval_s, "has_token": source.has_secret,
        "last_sync_at": source.last_sync_at, "last_success_at": source.last_success_at,
        "next_sync_at": source.next_sync_at, "last_error": source.last_error,
        "consecutive_failures": source.consecutive_failures,
        "commit": state.get("commit") if isinstance(state.get("commit"), str) else None,
        "active_sync_id": str(active.pk) if active else None,
    }


def summarize_result(result: dict[str, Any] | None) -> str:
    """One line for a sync job's result (pages, admin): the mode, the commits and what changed, naming the
    files when there are few, so "exactly that file was re-ingested" can be read off the history."""
    if not result:
        return ""
    mode = str(result.get("mode") or "")
    parts = [mode] if mode else []
    old, new = result.get("from"), result.get("to")
    if isinstance(new, str) and new:
        parts.append(f"{old[:10]}..{new[:10]}" if isinstance(old, str) and old else f"at {new[:10]}")
    for key in ("changed", "deleted", "renamed", "indexed", "removed"):  # git lists, then the crawler's
        items = result.get(key)
        if not isinstance(items, list):
            continue
        total = result.get(f"{key}_total", result.get(f"{key}_count"))
        total = total if isinstance(total, int) and total >= len(items) else len(items)
        if key in ("renamed", "removed") and not total:
            continue
        named = ", ".join(_path_text(i) for i in items[:3]) + (", ..." if total > 3 else "")
        parts.append(f"{total} {key}" + (f" ({named})" if items else ""))
    for key, label in (("fetched", "fetched"), ("not_modified", "not modified"), ("unchanged", "unchanged"),
                       ("errors_count", "errors")):
        if isinstance(result.get(key), int) and not isinstance(result.get(key), bool):
            parts.append(f"{result[key]} {label}")
    if result.get("stopped"):
        parts.append(f"stopped: {result['stopped']}")
    history = result.get("history")
    if isinstance(history, dict) and isinstance(history.get("remembered"), int):
        parts.append(f"history: {history['remembered']} commits remembered (+{history.get('added', 0)}"
                     + (", rebuilt" if history.get("rebuilt") else "")
                     + (f", stopped: {history['stopped']}" if history.get("stopped") else "")
                     + (f", {history['functions_pending']} still to read for the functions they changed"
                        if history.get("functions_pending") else "") + ")")
    elif isinstance(history, dict) and history.get("error"):
        parts.append(f"history not read: {history['error']}")
    return "; ".join(parts)


def _path_text(item: Any) -> str:
    """A path of a result list; a rename may be an [old, new] pair."""
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return f"{item[0]} -> {item[1]}"
    return str(item)


def remove_source(*, user: User | None, dataset: Dataset) -> None:
    """The dataset stops following its source; its documents stay (delete them, or the dataset, to drop them)."""
    _require_writer(user=user, dataset=dataset)
    syncs = list(IngestJob.objects.filter(dataset=dataset, options__origin="sync", status__in=ACTIVE))
    deleted, _ = Source.objects.filter(dataset=dataset).delete()  # the git mirror goes on commit (search.apps)
    if not deleted:
        raise NotFound("This dataset has no source.", code="no_source")
    request_cancel(jobs=syncs)  # a queued sync never runs; a running one stops at its next file or page


def active_sync(dataset: Dataset) -> IngestJob | None:
    return IngestJob.objects.filter(dataset=dataset, options__origin="sync", status__in=ACTIVE).first()


def start_sync(*, dataset: Dataset, user: User | None = None, trigger: str = "manual", run_now: bool = False,
               progress: Progress | None = None) -> IngestJob:
    """Queue (or with `run_now`, run here) a sync of the dataset's source; 409 while one is pending or running."""
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
            job = start_ingest(job=IngestJob(dataset=dataset, source=where, kind=dataset.kind, options=options),
                               user=user)
    if run_now:
        job = run_job(job=job, progress=progress)
        apply_own_writes()
    return job


@register("sync")
def run_sync(*, job: IngestJob, progress: Progress | None = None) -> dict[str, Any]:
    """Run one sync job (called by the runner under the job lock); record its outcome on the Source row."""
    source = Source.objects.filter(dataset_id=job.dataset_id).first()
    if source is None:
        raise NotFound("The dataset's source was removed before its sync ran.", code="source_removed")
    try:
        state = source_type(source.type).sync(job=job, source=source, progress=progress)
    except Exception as exc:
        _record(source_id=source.pk, error=exc)
        raise
    _record(source_id=source.pk, state=state)
    return state


def _record(*, source_id: int, state: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
    """The outcome of a sync on its Source: state and schedule on success; error and back-off on failure."""
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
    now = now or timezone.now()
    started = []
    with transaction.atomic():
        due = (Source.objects.select_for_update(skip_locked=True, of=("self",)).select_related("dataset")
               .filter(interval_s__isnull=False, next_sync_at__lte=now).order_by("next_sync_at")[:100])
        for source in due:
            if active_sync(source.dataset) is not None:
                continue
            job = start_ingest(job=IngestJob(
                dataset=source.dataset, source=display_url(source.type, source.config), kind=source.dataset.kind,
                options={"origin": "sync", "trigger": "schedule", "source_type": source.type}))
            source.next_sync_at = now + timedelta(seconds=source.interval_s or 0)
            source.save(update_fields=["next_sync_at", "updated_at"])
            started.append(str(job.pk))
    if started:
        log.info("sources: queued %d scheduled syncs", len(started))
    return started


def sync_history(*, dataset: Dataset, limit: int = 50) -> list[IngestJob]:
    """The dataset's sync jobs, newest first, each with `summary` (summarize_result of its result)."""
    jobs = list(IngestJob.objects.filter(dataset=dataset, options__origin="sync").order_by("-created_at")[:limit])
    for job in jobs:
        job.summary = summarize_result(job.result)
    return jobs


def reingest(*, dataset: Dataset, user: User | None = None) -> IngestJob:
    """Re-run the dataset's last source through the incremental runner (unchanged files are skipped).

    A dataset that follows a git or web source is synced instead (start_sync): its last job's
    `source` is a URL for display, and a sync must keep its one-at-a-time rule (409 sync_running)."""
    if source_of(dataset) is not None:
        return start_sync(dataset=dataset, user=user, trigger="admin")
    job = last_ingest(dataset=dataset)
    if job is None:
        raise ValueError(f"dataset {dataset.name!r} has never been ingested: run `manage.py ingest` once first")
    return start_ingest(job=IngestJob(dataset=dataset, source=job.source, kind=job.kind, options=job.options),
                        user=user)
