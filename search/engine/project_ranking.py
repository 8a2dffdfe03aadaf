"""A project's ranking settings: the reranker its queries use by default and the fusion it adopted.

Why a module: the settings are search's (search.models.ProjectRanking, one row per project, absent until one is
set), and every reader and writer (the query pipeline, `train_reranker`, `choose_fusion`, the project API and the
admin) goes through these few functions, so "absent" always reads as "blank".
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from projects import policy
from search.models import ProjectRanking

if TYPE_CHECKING:
    from accounts.models import User
    from projects.models import Project


def ranking_of(project: Project) -> ProjectRanking:
    """The project's settings; an unsaved blank row when none was ever set (reading never writes).

    Read through the project's `ranking` accessor, so one project object asks once per request, and a caller may
    try a setting on an in-memory copy without storing it (`copy.ranking = ProjectRanking(...)`)."""
    if project.pk is None:
        return ProjectRanking(project_id=None)
    try:
        return project.ranking
    except ProjectRanking.DoesNotExist:
        return ProjectRanking(project_id=project.pk)


def reranker_of(project: Project | None) -> str:
    """The name of the project's trained reranker, '' for none."""
    return ranking_of(project).reranker if project is not None else ""


def fusion_of(project: Project | None) -> dict[str, Any]:
    """What `choose_fusion` decided for the project ({} when it never ran)."""
    return dict(ranking_of(project).fusion or {}) if project is not None else {}


def save_reranker(*, project: Project, name: str) -> ProjectRanking:
    """Store the reranker (a name the caller checked is trained here; '' for none). No permission check: for
    `train_reranker`'s adoption, staff commands and the admin."""
    ranking, _ = ProjectRanking.objects.update_or_create(project=project, defaults={"reranker": name})
    project.ranking = ranking  # the object in hand reads what was stored
    return ranking


def save_fusion(*, project: Project, choice: dict[str, Any]) -> ProjectRanking:
    """Store what `choose_fusion` decided (the setting, its label, reason and evidence)."""
    ranking, _ = ProjectRanking.objects.update_or_create(project=project, defaults={"fusion": choice})
    project.ranking = ranking  # the object in hand reads what was stored
    return ranking


def set_reranker(*, user: User, project: Project, name: str) -> ProjectRanking:
    """Owners choose the project's reranker (projects.policy, "project.update"; the caller checked the name)."""
    policy.authorize("project.update", user=user, project=project)
    return save_reranker(project=project, name=name)
