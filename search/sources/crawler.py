"""Web sources: a polite, scoped crawl whose pages become the dataset's documents.

(Skeleton: the implementation is being written.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from search.ingest.progress import Progress
    from search.models import IngestJob, Source


def crawl_site(*, job: IngestJob, source: Source, progress: Progress | None = None) -> dict[str, Any]:
    """Crawl the source's seeds within scope and sync the dataset to what was found; -> the new Source.state."""
    raise NotImplementedError("web sources are not implemented yet")
