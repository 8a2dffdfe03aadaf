"""The built-in demo: this repository's own source ingested into the "demo" project."""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from inference.encoders import encoding_plan
from projects.models import Project
from search.engine.applier import apply_outbox
from search.ingest.jobs import start_ingest
from search.ingest.progress import duration, estimate_code_ingest, file_progress
from search.models import Dataset, IngestJob

if TYPE_CHECKING:
    from io import TextIOBase


def load_demo(stdout: TextIOBase | None = None) -> dict:
    """Ingest the repo's source (incremental: a second call skips unchanged files) and apply it to the index."""
    project, _ = Project.objects.get_or_create(slug="demo", defaults={"name": "Demo"})
    dataset, _ = Dataset.objects.get_or_create(project=project, name="platform-source", defaults={"kind": "code"})
    root = Path(settings.BASE_DIR)
    if stdout is not None:  # before the wait, say how long it will be on this machine (measured, not assumed)
        stdout.write(expected_ingest_line(root=root, dataset=dataset) + "\n")
    t0 = time.perf_counter()
    progress, bar = file_progress(dataset=dataset, desc="demo: ingest platform source")
    job = start_ingest(job=IngestJob(dataset=dataset, source=str(root), kind="code", options={"repo": "platform"}),
                       sync=True, progress=progress)
    bar.close()
    applied = apply_outbox()
    msg = (f"demo: {job.files_total} files, {job.chunks_written} chunks written, {job.files_skipped} unchanged, "
           f"{applied} index changes applied, {time.perf_counter() - t0:.1f} s")
    if stdout is not None:
        stdout.write(msg + "\n")
    return {"project": project.slug, "dataset_id": dataset.pk, "chunks": job.chunks_written}


def expected_ingest_line(*, root: Path, dataset: Dataset) -> str:
    """'demo: 1669 chunks to embed at 95 chunks/s (cpu bf16, batch 16): expected about 18 s' from a timed encode
    of a sample of the chunks the ingest will embed (search.ingest.progress.estimate_code_ingest)."""
    est = estimate_code_ingest(root=root, dataset=dataset)
    plan = encoding_plan()
    if not est.to_embed:
        return (f"demo: {est.files} files, {est.chunks} chunks, all already embedded: expected a few seconds "
                f"(unchanged files are skipped)")
    return (f"demo: {est.files} files, {est.to_embed} of {est.chunks} chunks to embed at {est.rate_per_s:.0f} "
            f"chunks/s ({plan.describe()}, measured on a sample): expected about {duration(est.seconds)} of "
            f"embedding, plus reading and writing")
