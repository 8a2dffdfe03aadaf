"""Who may see what. Every query path resolves access here, in SQL, first.

accessible = the project's own datasets ∪ global datasets ∪ datasets shared to
it through an unrevoked ProjectShare (seed 000, "Filters & Access").
"""
from __future__ import annotations

from django.db import connection

from config.errors import NotFound
from projects.models import Membership, Project

_ACCESS_SQL = """
SELECT d.id FROM projects_dataset d
 WHERE d.project_id = %(pid)s
    OR (%(glob)s AND d.is_global)
    OR EXISTS (SELECT 1 FROM projects_projectshare s
                WHERE s.dataset_id = d.id AND s.project_id = %(pid)s AND s.revoked_at IS NULL)
"""


def accessible_dataset_ids(project: Project, *, include_global: bool = True) -> set[int]:
    """One SQL query: own ∪ global ∪ actively shared."""
    with connection.cursor() as cur:
        cur.execute(_ACCESS_SQL, {"pid": project.pk, "glob": include_global})
        return {row[0] for row in cur.fetchall()}


def is_resource_accessible(project: Project, resource_type: str, resource_id: int | str) -> bool:
    """Re-check one resource (dataset, document or chunk) against the live access set."""
    from django.apps import apps

    if resource_type == "dataset":
        dataset_id = resource_id
    elif resource_type in {"document", "chunk"}:
        model = apps.get_model("search", "Document" if resource_type == "document" else "Chunk")
        dataset_id = model.objects.filter(pk=resource_id).values_list("dataset_id", flat=True).first()
        if dataset_id is None:
            return False
    else:
        raise ValueError(f"unknown resource type {resource_type!r}")
    sql = f"SELECT EXISTS (SELECT 1 FROM ({_ACCESS_SQL}) a WHERE a.id = %(did)s)"
    with connection.cursor() as cur:
        cur.execute(sql, {"pid": project.pk, "glob": True, "did": dataset_id})
        return bool(cur.fetchone()[0])


def filter_accessible_chunk_ids(project: Project, chunk_ids: list[int], *, include_global: bool = True) -> set[int]:
    """Batch form of is_resource_accessible for chunks: one query for a whole result list."""
    if not chunk_ids:
        return set()
    sql = f"SELECT c.id FROM search_chunk c WHERE c.id = ANY(%(ids)s) AND c.dataset_id IN ({_ACCESS_SQL})"
    with connection.cursor() as cur:
        cur.execute(sql, {"pid": project.pk, "glob": include_global, "ids": list(chunk_ids)})
        return {row[0] for row in cur.fetchall()}


def project_for_member(*, user, slug: str) -> Project:  # noqa: ANN001
    """The project if the user is a member; otherwise 404 so existence does not leak."""
    project = Project.objects.filter(slug=slug, memberships__user_id=getattr(user, "pk", None)).first()
    if project is None:
        raise NotFound("Project not found.")
    return project


def membership_role(*, user, project: Project) -> str | None:  # noqa: ANN001
    return Membership.objects.filter(user_id=user.pk, project=project).values_list("role", flat=True).first()
