"""The projects an account is in, as the account and project pages list them.

Datasets and their shares are search's (search.ingest.sharing); this is the membership side they start from.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from projects.access import limit_to_key_projects
from projects.models import Membership

if TYPE_CHECKING:
    from accounts.models import User


def projects_of(*, user: User) -> list[dict[str, Any]]:
    """The user's projects with roles; a project-limited API key sees only its projects."""
    rows = limit_to_key_projects(Membership.objects.filter(user_id=user.pk), user)
    return [{"project": m.project, "role": m.role} for m in rows.select_related("project").order_by("project__slug")]
