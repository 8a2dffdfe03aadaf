"""Per-project quotas on documents, chunks and stored bytes: usage, limits, and the check before a write.

Why at the project: the project is what a team owns and what staff size; every dataset of the project
counts toward it. A push or upload that would pass a quota is refused as a whole (413 quota_exceeded with
the quota and the usage), and the ingest job checks again inside its writing transaction (two jobs at
once cannot both squeeze under the limit: the project row is locked while they count).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import connection

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


def usage_of(project: Project) -> Usage:
    """Documents, chunks and source bytes over the project's own datasets (two aggregate queries)."""
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), coalesce(sum(d.size_bytes), 0) FROM search_document d "
                    "JOIN projects_dataset ds ON ds.id = d.dataset_id WHERE ds.project_id = %s", [project.pk])
        docs, size = cur.fetchone()
        cur.execute("SELECT count(*) FROM search_chunk c JOIN projects_dataset ds ON ds.id = c.dataset_id "
                    "WHERE ds.project_id = %s", [project.pk])
        chunks = cur.fetchone()[0]
    return Usage(documents=int(docs), chunks=int(chunks), bytes=int(size))


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
