"""Who may read what: the datasets a project reads, and the per-resource re-check before anything leaves.

accessible = the project's own datasets ∪ global datasets ∪ datasets shared to it through an unrevoked
ProjectShare. Every query path resolves access here, in SQL, first; search owns datasets, shares, documents and
chunks and their tables, so the checks that join them live with them (projects decides who is a member:
projects.access).
"""
from __future__ import annotations

from django.db import connection

from projects.models import Project
from search.models import Chunk, Dataset, Document, ProjectShare

# The ids of the datasets project %(pid)s may read (%(glob)s: whether global datasets count).
ACCESSIBLE_DATASETS_SQL = f"""
SELECT d.id FROM {Dataset._meta.db_table} d
 WHERE d.project_id = %(pid)s
    OR (%(glob)s AND d.is_global)
    OR EXISTS (SELECT 1 FROM {ProjectShare._meta.db_table} s
                WHERE s.dataset_id = d.id AND s.project_id = %(pid)s AND s.revoked_at IS NULL)
"""


def accessible_dataset_ids(project: Project, *, include_global: bool = True) -> set[int]:
    """One SQL query: own ∪ global ∪ actively shared."""
    with connection.cursor() as cur:
        cur.execute(ACCESSIBLE_DATASETS_SQL, {"pid": project.pk, "glob": include_global})
        return {row[0] for row in cur.fetchall()}


def is_dataset_accessible(project: Project, dataset_id: int | str) -> bool:
    """Re-check one dataset against the live access set."""
    sql = f"SELECT EXISTS (SELECT 1 FROM ({ACCESSIBLE_DATASETS_SQL}) a WHERE a.id = %(did)s)"
    with connection.cursor() as cur:
        cur.execute(sql, {"pid": project.pk, "glob": True, "did": dataset_id})
        return bool(cur.fetchone()[0])


def is_resource_accessible(project: Project, resource_type: str, resource_id: int | str) -> bool:
    """Re-check one resource (dataset, document or chunk) against the live access set."""
    if resource_type == "dataset":
        return is_dataset_accessible(project, resource_id)
    if resource_type not in {"document", "chunk"}:
        raise ValueError(f"unknown resource type {resource_type!r}")
    model = Document if resource_type == "document" else Chunk
    dataset_id = model.objects.filter(pk=resource_id).values_list("dataset_id", flat=True).first()
    return dataset_id is not None and is_dataset_accessible(project, dataset_id)


def filter_accessible_chunk_ids(project: Project, chunk_ids: list[int], *, include_global: bool = True) -> set[int]:
    """Batch form of is_resource_accessible for chunks: one query for a whole result list."""
    if not chunk_ids:
        return set()
    sql = (f"SELECT c.id FROM {Chunk._meta.db_table} c "
           f"WHERE c.id = ANY(%(ids)s) AND c.dataset_id IN ({ACCESSIBLE_DATASETS_SQL})")
    with connection.cursor() as cur:
        cur.execute(sql, {"pid": project.pk, "glob": include_global, "ids": list(chunk_ids)})
        return {row[0] for row in cur.fetchall()}
