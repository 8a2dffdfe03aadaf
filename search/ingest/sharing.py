"""Datasets and shares: who may create, grant and revoke, and what a project sees.

Why a module of its own: the API, the admin actions and the demo command all
change shares, and the rule "only an owner of the dataset's project grants"
(projects.policy) must hold the same way everywhere.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from accounts import limits
from config.errors import BadInput, Conflict, Forbidden, NotFound
from projects import policy
from projects.models import Project
from projects.sharing import projects_of
from search.engine.access import accessible_dataset_ids
from search.models import Dataset, ProjectShare

if TYPE_CHECKING:
    from accounts.models import User


def visible_datasets(*, project: Project) -> list[dict]:
    """Own, global and shared datasets, each tagged with how the project sees it (one query)."""
    ids = accessible_dataset_ids(project)
    shared = set(ProjectShare.objects.filter(project=project, revoked_at__isnull=True).values_list("dataset_id", flat=True))
    out = []
    for ds in Dataset.objects.filter(pk__in=ids).select_related("project").order_by("project__slug", "name"):
        access = "own" if ds.project_id == project.pk else ("shared" if ds.pk in shared else "global")
        out.append({"dataset": ds, "access": access})
    return out


def datasets_seen_by(*, user: User, project: Project) -> list[dict]:
    """visible_datasets for one caller, each row with `owner`: the owning project's slug, or None for a global
    dataset of a project the caller is not in (its name does not leak). The API's dataset list and the MCP
    server's list_datasets both read this."""
    rows = visible_datasets(project=project)
    mine = {p["project"].pk for p in projects_of(user=user)}
    for r in rows:
        ds = r["dataset"]
        r["owner"] = None if ds.project_id not in mine and r["access"] == "global" else ds.project.slug
    return rows


def create_dataset(*, user: User, project: Project, name: str, kind: str, description: str = "",
                   is_global: bool = False) -> Dataset:
    """Owners and editors add datasets; only staff may mark one global (it is visible to every project).

    Past the account's dataset limit (accounts.limits: the datasets this account created, wherever) it is 409
    account_limit, counted with the account's row locked, so concurrent creates stop at the limit."""
    policy.authorize("dataset.create", user=user, project=project)
    if is_global and not user.is_staff:
        raise Forbidden("Only staff can create global datasets.", field="is_global")
    if kind not in Dataset.Kind.values:
        raise BadInput(f"kind must be one of {', '.join(Dataset.Kind.values)}", field="kind")
    name = (name or "").strip()
    if not name:
        raise BadInput("name is required", field="name")
    try:
        with transaction.atomic():
            account = limits.lock_account(user=user)
            limits.check(account=account, what="datasets", held=Dataset.objects.filter(created_by_id=user.pk).count())
            return Dataset.objects.create(project=project, name=name, kind=kind, description=description,
                                          is_global=is_global, created_by_id=user.pk)
    except IntegrityError:
        raise Conflict(f"This project already has a dataset named {name!r}.", field="name",
                       code="dataset_exists") from None


def grant_share(*, user: User, dataset_id: int, to_project: Project) -> ProjectShare:
    """Share a dataset into `to_project` (projects.policy, "share.grant"): the caller owns both the dataset's
    project and `to_project`, since a share changes what `to_project`'s members retrieve.

    A dataset the caller cannot see at all is 404 (no existence leak); one they see but do not own is 403.
    Sharing twice returns the active share.
    """
    dataset = Dataset.objects.filter(pk=dataset_id).select_related("project").first()
    if dataset is None:
        raise NotFound("Dataset not found.", field="dataset_id")
    policy.authorize("share.grant", user=user, project=to_project, there=dataset.project, what="Dataset")
    if dataset.project_id == to_project.pk:
        raise BadInput("A project already sees its own datasets.", field="dataset_id")
    with transaction.atomic():
        existing = ProjectShare.objects.select_for_update().filter(dataset=dataset, project=to_project,
                                                                   revoked_at__isnull=True).first()
        if existing:
            return existing
        try:
            with transaction.atomic():
                return ProjectShare.objects.create(dataset=dataset, project=to_project, granted_by=user)
        except IntegrityError:  # a concurrent grant won; return it
            return ProjectShare.objects.get(dataset=dataset, project=to_project, revoked_at__isnull=True)


def revoke_share(*, user: User, share_id: int, project: Project) -> ProjectShare:
    """Owners on either side may end a share (projects.policy, "share.revoke"): the giver takes it back, the
    receiver drops it. `project` is either side: the share is into it or of one of its datasets."""
    share = (ProjectShare.objects.filter(Q(project=project) | Q(dataset__project=project), pk=share_id)
             .select_related("project", "dataset__project").first())
    if share is None:
        raise NotFound("Share not found.")
    policy.authorize("share.revoke", user=user, project=share.project, there=share.dataset.project, what="Share")
    return revoke_share_row(share=share)


def revoke_share_row(*, share: ProjectShare) -> ProjectShare:
    """No permission check: for the admin action and commands run by staff."""
    if share.revoked_at is None:
        ProjectShare.objects.filter(pk=share.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        share.refresh_from_db(fields=["revoked_at"])
    return share


def incoming_shares(*, project: Project) -> list[ProjectShare]:
    return list(ProjectShare.objects.filter(project=project).select_related("dataset__project", "granted_by"))


def outgoing_shares(*, project: Project) -> list[ProjectShare]:
    """Shares of this project's datasets into other projects, revoked ones included."""
    return list(ProjectShare.objects.filter(dataset__project=project)
                .select_related("dataset__project", "project", "granted_by"))
