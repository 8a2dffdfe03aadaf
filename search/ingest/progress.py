"""A tqdm progress bar fed by the runner's per-file callback (the ingest command and the demo loader share it)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from search.models import IngestJob

if TYPE_CHECKING:
    from projects.models import Dataset


def file_progress(*, dataset: Dataset, desc: str) -> tuple[Callable[[dict[str, Any]], None], tqdm]:
    """The runner learns the file count after walking the source, so the total is read from the job lazily."""
    bar = tqdm(desc=desc, unit="file")

    def progress(info: dict[str, Any]) -> None:
        if not bar.total:
            job = IngestJob.objects.filter(dataset=dataset).order_by("-created_at").first()
            if job and job.files_total:
                bar.total = job.files_total
        if "path" in info:  # the file walker reports each file
            bar.update(1)
        elif "files" in info:  # sync_documents (rules, BEIR) reports running totals per batch
            bar.update(info["files"] - bar.n)

    return progress, bar
