"""`manage.py sync PROJECT DATASET`: sync a dataset's source here, now, with a progress bar.

The same job as POST .../datasets/{id}/sync and the scheduler (search.sources.sync.start_sync), run in this
process instead of a worker; 409 sync_running and no_source become a CommandError."""
from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from config.errors import ApiError
from search.ingest.progress import file_progress
from search.models import Dataset, IngestJob
from search.sources.sync import start_sync, summarize_result


class Command(BaseCommand):
    help = "Sync a dataset's git or web source now, in this process (incremental: unchanged files are skipped)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", help="project slug")
        parser.add_argument("dataset", help="dataset name in the project")

    def handle(self, *args: object, **opts: Any) -> None:
        dataset = Dataset.objects.filter(project__slug=opts["project"], name=opts["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset {opts['dataset']!r} in project {opts['project']!r}")
        progress, bar = file_progress(dataset=dataset, desc=f"sync {dataset}")
        t0, started = time.perf_counter(), timezone.now()
        try:
            job = start_sync(dataset=dataset, trigger="command", run_now=True, progress=progress)
        except Exception as exc:  # say why in one line, not with a traceback (re-raised if neither applies)
            # refused before it started (no source, one running) or failed while it ran (the job row says why)
            job = IngestJob.objects.filter(dataset=dataset, options__origin="sync", created_at__gte=started,
                                           status="failed").order_by("-created_at").first()
            if job is not None:
                raise CommandError(f"sync failed: {job.error}") from None
            if isinstance(exc, ApiError):
                raise CommandError(f"{exc.code}: {exc.detail}") from None
            raise
        finally:
            bar.close()
        self.stdout.write(
            f"{job.status}: {summarize_result(job.result) or 'no result'}; {job.files_total} files "
            f"({job.files_skipped} unchanged, {job.files_deleted} deleted), {job.chunks_written} chunks, "
            f"{job.embeddings_computed} embedded / {job.embeddings_cached} cached, "
            f"{time.perf_counter() - t0:.1f}s")
