"""`manage.py ingest --project P --dataset D --kind code|web|rules PATH`: the same job as the API and admin action."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from redis.exceptions import RedisError
from tqdm import tqdm

from accounts.models import User
from config.errors import DependencyDown
from config.heartbeat import read as worker_heartbeats
from projects.models import Membership, Project
from search.engine.applier import apply_outbox
from search.ingest.jobs import start_ingest
from search.ingest.progress import file_progress
from search.models import Dataset, IngestJob

# How long a queued job may wait before the command says why, where no worker has a heartbeat: without a worker it
# would wait forever behind a bar stuck at 0 (`make run` starts one; --sync ingests in this process).
WORKER_HINT_S = 5.0
ENDED = (IngestJob.Status.DONE, IngestJob.Status.FAILED, IngestJob.Status.CANCELLED)


def _no_worker() -> bool:
    try:
        return not worker_heartbeats().live
    except RedisError:  # the broker went away as well: no worker will take the job either
        return True


class Command(BaseCommand):
    help = "Ingest a code directory, saved web pages or a rulebook into a project's dataset (incremental)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path")
        parser.add_argument("--project", default="", help="project slug (created if missing; rules default: demo)")
        parser.add_argument("--dataset", default="",
                            help="dataset name in the project (created if missing; rules default: <ruleset>-rules)")
        parser.add_argument("--kind", choices=["code", "web", "rules"], default="code")
        parser.add_argument("--repo", default="", help="repo name stored on chunks (default: the folder name)")
        parser.add_argument("--global", dest="is_global", action="store_true", help="mark the dataset global")
        parser.add_argument("--ruleset", "--ruleset-id", dest="ruleset_id", default="", help="rules: ruleset id")
        parser.add_argument("--book", "--book-id", dest="book_id", default="", help="rules: book id")
        parser.add_argument("--owner", default="", help="email of a user to add as project owner")
        parser.add_argument("--sync", action="store_true", help="run inline instead of enqueueing to Celery")
        parser.add_argument("--no-apply", action="store_true",
                            help="do not apply the outbox to the index here (when a server owns the embedded store)")

    def handle(self, *args: object, **opts: Any) -> None:
        source = Path(opts["path"]).expanduser().resolve()
        if not source.exists():
            raise CommandError(f"{source} does not exist")
        if opts["kind"] == "rules":
            # `ingest --kind rules --ruleset R --book B PATH`: a global rules dataset of the demo project
            opts["project"] = opts["project"] or "demo"
            opts["dataset"] = opts["dataset"] or f"{opts['ruleset_id'] or source.name}-rules"
            opts["is_global"] = opts["is_global"] or opts["project"] == "demo"
        if not opts["project"] or not opts["dataset"]:
            raise CommandError("--project and --dataset are required for code and web ingestion")
        project, _ = Project.objects.get_or_create(slug=opts["project"], defaults={"name": opts["project"].title()})
        if opts["owner"]:
            user = User.objects.filter(email=opts["owner"]).first()
            if user is None:
                raise CommandError(f"no user {opts['owner']}")
            Membership.objects.get_or_create(project=project, user=user, defaults={"role": "owner"})
        dataset, _ = Dataset.objects.get_or_create(project=project, name=opts["dataset"],
                                                   defaults={"kind": opts["kind"], "is_global": opts["is_global"]})
        if opts["is_global"] and not dataset.is_global:
            dataset.is_global = True
            dataset.save(update_fields=["is_global"])
        options = {k: v for k, v in {"repo": opts["repo"], "ruleset_id": opts["ruleset_id"],
                                     "book_id": opts["book_id"]}.items() if v}
        t0 = time.perf_counter()
        if opts["sync"]:
            progress, bar = file_progress(dataset=dataset, desc=f"ingest {source.name}")
            job = start_ingest(job=IngestJob(dataset=dataset, source=str(source), kind=opts["kind"], options=options),
                               sync=True, progress=progress, apply_index=False)  # applied below unless --no-apply
            bar.close()
        else:
            job = start_ingest(job=IngestJob(dataset=dataset, source=str(source), kind=opts["kind"], options=options))
            bar = tqdm(desc=f"ingest {source.name} (celery)", unit="file")
            hinted = False
            while True:
                job.refresh_from_db()
                bar.total = job.files_total or None  # known once the worker has walked the source: tqdm's ETA
                bar.update(job.files_done - bar.n)  # through update(), so tqdm measures the rate it shows
                if job.status in ENDED:
                    break
                if (not hinted and job.status == IngestJob.Status.PENDING
                        and time.perf_counter() - t0 > WORKER_HINT_S and _no_worker()):
                    tqdm.write(f"job {job.pk} is queued and no Celery worker is running: start one (`make run`), "
                               "or stop this and ingest here with --sync", file=sys.stderr)
                    hinted = True
                time.sleep(0.5)
            bar.close()
        if job.status == IngestJob.Status.FAILED:
            raise CommandError(f"ingest failed: {job.error}")
        if job.status == IngestJob.Status.CANCELLED:
            raise CommandError(f"ingest job {job.pk} was cancelled")
        applied = 0
        if not opts["no_apply"]:

            try:
                applied = apply_outbox()
            except DependencyDown as exc:  # the running server owns the embedded store; its applier thread applies
                self.stderr.write(f"index not updated here ({exc.detail}); the process that owns it will apply it")
        self.stdout.write(
            f"{job.status}: {job.files_total} files ({job.files_skipped} skipped, {job.files_deleted} deleted), "
            f"{job.chunks_written} chunks, {job.embeddings_computed} embedded / {job.embeddings_cached} cached, "
            f"{applied} outbox rows applied, {time.perf_counter() - t0:.1f}s; dataset id {dataset.pk}")
