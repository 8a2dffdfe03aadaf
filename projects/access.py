"""Who is in a project: membership, roles, and the project limit of an API key.

Which datasets a project reads (own, global, shared) is search's, which owns datasets and shares
(search.engine.access).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from django.db import models

from accounts.apikeys import key_project_ids  # the request key's project limit, set by accounts' authentication
from config.errors import NotFound
from projects.models import Membership, Project

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser
    from django.db.models import QuerySet

    from accounts.models import User

_M = TypeVar("_M", bound=models.Model)

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
