"""Re-embedding a dataset as an ingest job: a row with counters, so it has the rate and the time left ingest jobs have.

Why a job type and not a bare Celery task: the admin's "Recompute embeddings" used to queue a task that nobody
could watch, though on a CPU it runs at the encoder's pace (tens of chunks per second: an hour for a large
dataset). As an IngestJob it is listed with the other jobs, its rate and ETA come from the same reading of its
counters (search.ingest.progress.ingest_job_pace), it takes a slot of its tenant like any job, and a cancel or the
job's time budget stops it between batches. A re-embed job counts chunks where other jobs count files
(`files_total`, `files_done`); `pace_unit` names the unit.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from search.ingest.jobs import enqueue, register
from search.ingest.maintenance import reembed
from search.ingest.writer import Progress
from search.models import Chunk, IngestJob

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from search.models import Dataset

ORIGIN = "reembed"


def start_reembed(*, dataset: Dataset, force: bool = True, user: User | None = None) -> IngestJob:
    """Queue a re-embed of the dataset's chunks (`force`: recompute cached vectors too) for the model it is
    searched with; the job runs on a worker once the caller's transaction commits."""
    job = IngestJob.objects.create(dataset=dataset, source="re-embed", kind=dataset.kind,
                                   options={"origin": ORIGIN, "force": bool(force)},
                                   created_by=user if getattr(user, "pk", None) else None)
    enqueue(job)
    return job


@register(ORIGIN)
def run_reembed(*, job: IngestJob, progress: Progress | None) -> None:
    """Fill (or recompute) the vectors of every chunk and queue their upserts, reporting chunks done per batch."""
    total = Chunk.objects.filter(dataset_id=job.dataset_id).count()
    IngestJob.objects.filter(pk=job.pk).update(files_total=total)

    def tick(done: int, total: int) -> None:
        IngestJob.objects.filter(pk=job.pk).update(files_done=done, files_total=total)
        if progress is not None:  # the job's budget and cancel are checked here, between batches
            progress({"files": done})

    stats: dict[str, Any] = reembed(dataset_id=job.dataset_id, force=bool(job.options.get("force")), progress=tick)
    IngestJob.objects.filter(pk=job.pk).update(
        files_done=stats["chunks"], files_total=stats["chunks"], embeddings_computed=stats["embedded"],
        embeddings_cached=stats["chunks"] - stats["embedded"], result={"model": stats["model"], "unit": "chunks"})
