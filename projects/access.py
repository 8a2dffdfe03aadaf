"""Who may see what. Every query path resolves access here, in SQL, first.

accessible = the project's own datasets ∪ global datasets ∪ datasets shared to
it through an unrevoked ProjectShare.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from django.db import connection, models

from accounts.apikeys import key_project_ids  # the request key's project limit, set by accounts' authentication
from config.errors import NotFound
from projects.models import Membership, Project

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser
    from django.db.models import QuerySet

    from accounts.models import User

_M = TypeVar("_M", bound=models.Model)

# The ids of the datasets project %(pid)s may read (%(glob)s: whether global datasets count). Public so that
# the app that owns a dataset's content (search) can re-check its own rows against it in one query.
ACCESSIBLE_DATASETS_SQL = """
SELECT d.id FROM projects_dataset d
 WHERE d.project_id = %(pid)s
    OR (%(glob)s AND d.is_global)
    OR EXISTS (SELECT 1 FROM projects_projectshare s
                WHERE s.dataset_id = d.id AND s.project_id = %(pid)s AND s.revoked_at IS NULL)
"""


def accessible_dataset_ids(project: Project, *, include_global: bool = True) -> set[int]:
    """One SQL query: own ∪ global ∪ actively shared."""
    with connection.cursor() as cur:
        cur.execute(ACCESSIBLE_DATASETS_SQL, {"pid": project.pk, "glob": include_global})
        return {row[0] for row in cur.fetchall()}


def is_dataset_accessible(project: Project, dataset_id: int | str) -> bool:
    """Re-check one dataset against the live access set (search.engine.access does documents and chunks)."""
    sql = f"SELECT EXISTS (SELECT 1 FROM ({ACCESSIBLE_DATASETS_SQL}) a WHERE a.id = %(did)s)"
    with connection.cursor() as cur:
        cur.execute(sql, {"pid": project.pk, "glob": True, "did": dataset_id})
        return bool(cur.fetchone()[0])


def limit_to_key_projects(queryset: QuerySet[_M], user: User | AnonymousUser,
                          field: str = "project_id") -> QuerySet[_M]:
    """Narrow a queryset to the key's projects (`field` is the path to the project id, e.g. "dataset__project_id")."""
    ids = key_project_ids(user)
    return queryset if ids is None else queryset.filter(**{f"{field}__in": ids})


def project_for_member(*, user: User | AnonymousUser, slug: str) -> Project:
    """The project if the user is a member (and the API key, if limited, covers it); otherwise 404 so
    existence does not leak."""
    qs = Project.objects.filter(slug=slug, memberships__user_id=getattr(user, "pk", None))
    project = limit_to_key_projects(qs, user, "pk").first()
    if project is None:
        raise NotFound("Project not found.")
    return project


def membership_role(*, user: User | AnonymousUser, project: Project) -> str | None:
    """The user's role in the project; None when not a member or outside the API key's project limit."""
    ids = key_project_ids(user)
    if ids is not None and project.pk not in ids:
        return None
    return Membership.objects.filter(user_id=user.pk, project=project).values_list("role", flat=True).first()
