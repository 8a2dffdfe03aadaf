"""Per-project quotas on documents, chunks and stored bytes: usage, limits, and the check before a write.

Why at the project: the project is what a team owns and what staff size; every dataset of the project
counts toward it. A push or upload that would pass a quota is refused as a whole (413 quota_exceeded with
the quota and the usage), and the ingest job checks again inside its writing transaction (two jobs at
once cannot both squeeze under the limit: the project row is locked while they count).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.conf import settings

from config.errors import ApiError
from projects.models import Project


class QuotaExceeded(ApiError):
    status_code = 413
    code = "quota_exceeded"


@dataclass(frozen=True)
class Usage:
    documents: int
    chunks: int
    bytes: int


def limits_of(project: Project) -> Usage:
    return Usage(documents=project.quota_documents if project.quota_documents is not None else settings.QUOTA_DOCUMENTS,
                 chunks=project.quota_chunks if project.quota_chunks is not None else settings.QUOTA_CHUNKS,
                 bytes=project.quota_bytes if project.quota_bytes is not None else settings.QUOTA_BYTES)


# What the project's datasets hold, counted by the app that holds it (search registers its counter when it starts:
# search.apps); projects may not import search (docs/architecture.md), so the count is asked for, not made here.
Counter = Callable[[Project], Usage]
_COUNTERS: list[Counter] = []


def register_counter(counter: Counter) -> Counter:
    """Add what an app stores for a project to its usage (idempotent)."""
    if counter not in _COUNTERS:
        _COUNTERS.append(counter)
    return counter


def usage_of(project: Project) -> Usage:
    """Documents, chunks and source bytes over the project's own datasets, summed over the registered counters."""
    counted = [count(project) for count in _COUNTERS]
    return Usage(documents=sum(u.documents for u in counted), chunks=sum(u.chunks for u in counted),
                 bytes=sum(u.bytes for u in counted))


def report(project: Project) -> dict[str, dict[str, int]]:
    """{"usage": {...}, "quota": {...}} for GET /api/projects/{slug} and the settings page."""
    return {"usage": asdict(usage_of(project)), "quota": asdict(limits_of(project))}


def check(*, project: Project, add_documents: int = 0, add_chunks: int = 0, add_bytes: int = 0,
          usage: Usage | None = None) -> None:
    """Raise QuotaExceeded if adding these would pass a quota (the additions may be net, i.e. negative)."""
    usage = usage or usage_of(project)
    quota = limits_of(project)
    for name, add in (("documents", add_documents), ("chunks", add_chunks), ("bytes", add_bytes)):
        have, limit = getattr(usage, name), getattr(quota, name)
        if add > 0 and have + add > limit:
            raise QuotaExceeded(f"This would bring the project to {have + add} {name}; its quota is {limit}.",
                                field=name, extra={"quota": {name: limit}, "usage": {name: have},
                                                   "requested": {name: add}})
