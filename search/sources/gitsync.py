"""Git sources: fetch, then ingest only what changed between the commit the dataset reflects and the new one.

(Skeleton: the implementation is being written.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from search.ingest.progress import Progress
    from search.models import IngestJob, Source


def sync_git(*, job: IngestJob, source: Source, progress: Progress | None = None) -> dict[str, Any]:
    """Bring the dataset to the source's ref; -> the new Source.state ({"commit": sha, "ref": ...})."""
    raise NotImplementedError("git sources are not implemented yet")
