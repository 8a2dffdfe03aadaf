"""The built-in demo: this repository's own source ingested into the "demo" project."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from projects.models import Dataset, Project
from search.engine.index import apply_outbox
from search.ingest.jobs import start_ingest
from search.ingest.progress import file_progress

if TYPE_CHECKING:
    from io import TextIOBase


def load_demo(stdout: TextIOBase | None = None) -> dict:
    """Ingest the repo's source (incremental: a second call skips unchanged files) and apply it to the index."""
    project, _ = Project.objects.get_or_create(slug="demo", defaults={"name": "Demo"})
    dataset, _ = Dataset.objects.get_or_create(project=project, name="platform-source", defaults={"kind": "code"})
    progress, bar = file_progress(dataset=dataset, desc="demo: ingest platform source")
    job = start_ingest(dataset=dataset, source=str(Path(settings.BASE_DIR)), kind="code",
                       options={"repo": "platform"}, sync=True, progress=progress)
    bar.close()
    applied = apply_outbox()
    msg = (f"demo: {job.files_total} files, {job.chunks_written} chunks written, {job.files_skipped} unchanged, "
           f"{applied} index changes applied")
    if stdout is not None:
        stdout.write(msg + "\n")
    return {"project": project.slug, "dataset_id": dataset.pk, "chunks": job.chunks_written}
