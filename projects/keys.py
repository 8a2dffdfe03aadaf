"""An API key's project limit in projects' words: accounts stores a key's project ids and asks here which slugs
they are and which ids a list of slugs names among a user's projects (accounts.apikeys.KeyProjects; installed by
projects/apps.py when the app starts, since accounts sits below projects and does not import it)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from accounts.apikeys import KeyProjects
from projects.access import limit_to_key_projects
from projects.models import Membership, Project

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User


def member_ids(*, user: User | AnonymousUser, slugs: list[str]) -> dict[str, int]:
    """{slug: id} of the projects among `slugs` the user is a member of, within the request key's own limit (a key
    that issues a key names only projects it can see)."""
    rows = limit_to_key_projects(Membership.objects.filter(user_id=user.pk, project__slug__in=slugs), user)
    return dict(rows.values_list("project__slug", "project_id"))


def slugs(*, ids: list[int]) -> list[str]:
    """The slugs of the projects that still exist among `ids`, sorted: a deleted project drops out."""
    return list(Project.objects.filter(pk__in=ids).order_by("slug").values_list("slug", flat=True))


KEY_PROJECTS = KeyProjects(member_ids=member_ids, slugs=slugs)
