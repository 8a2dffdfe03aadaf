"""The per-resource access re-check for search's own rows (documents, chunks), before anything leaves.

Why here and not in projects.access: projects decides which datasets a project may read
(`accessible_dataset_ids`, `ACCESSIBLE_DATASETS_SQL`); search owns documents and chunks and their tables, so
the check that joins a chunk to its dataset lives with them and projects never reads search's tables.
"""
from __future__ import annotations

from django.db import connection

from projects.access import ACCESSIBLE_DATASETS_SQL, is_dataset_accessible
from projects.models import Project
from search.models import Chunk, Document


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
