"""Server-rendered project settings: members, datasets, shares, rename and delete.

Why pages and not only the API: a team must be able to run its projects from the browser alone. Every
POST here is CSRF-protected (Django's middleware; none is exempt), calls the same service function as the
API (projects.membership, search.ingest.datasets, search.ingest.sharing) and shows an ApiError's detail with its
HTTP status, so behaviour and messages cannot drift between the two. Served by search's edge because the page
lists search's rows (datasets with their counts, shares); "New project" is projects' (projects.pages).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from config.errors import ApiError, BadInput, NotFound
from projects import membership
from projects.access import membership_role, project_for_member
from projects.models import Membership, Project
from search.ingest import sharing
from search.ingest.datasets import WRITERS, datasets_overview, delete_dataset
from search.models import Dataset


def _error(exc: ApiError) -> dict[str, Any]:
    return {"code": exc.code, "status": exc.status_code, "detail": exc.detail, "field": exc.field}


def _project(request: HttpRequest, slug: str) -> Project:
    """The project for a member; a plain 404 page otherwise (existence does not leak)."""
    try:
        return project_for_member(user=request.user, slug=slug)
    except NotFound:
        raise Http404("Project not found.") from None


def _settings_page(request: HttpRequest, project: Project, *, error: ApiError | None = None,
                   form: dict[str, Any] | None = None) -> HttpResponse:
    role = membership_role(user=request.user, project=project)
    ctx = {
        "project": project,
        "role": role,
        "is_owner": role == Membership.Role.OWNER,
        "can_edit": role in WRITERS,
        "roles": membership.ROLES,
        "members": membership.members_of(user=request.user, project=project),
        "datasets": datasets_overview(project=project),
        "incoming": sharing.incoming_shares(project=project),
        "outgoing": sharing.outgoing_shares(project=project),
        "error": _error(error) if error else None,
        "form": form or {},
    }
    return render(request, "pages/project_settings.html", ctx, status=error.status_code if error else 200)


def _act(request: HttpRequest, project: Project, action: Callable[[], object], done: str, *,
         form: dict[str, Any] | None = None, then: str | None = None) -> HttpResponse:
    """Run one service call; on success redirect (POST/redirect/GET) with a message, on an ApiError re-render
    the settings page with the error's detail and status."""
    try:
        action()
    except ApiError as exc:
        return _settings_page(request, project, error=exc, form=form)
    messages.success(request, done)
    return redirect(then or "project-settings", **({} if then else {"slug": project.slug}))


@login_required
@require_http_methods(["GET"])
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    return _settings_page(request, _project(request, slug))


@login_required
@require_http_methods(["POST"])
def project_rename(request: HttpRequest, slug: str) -> HttpResponse:
    project = _project(request, slug)
    name = request.POST.get("name", "")
    return _act(request, project, lambda: membership.rename_project(user=request.user, project=project, name=name),
                "Project renamed.", form={"name": name})


@login_required
@require_http_methods(["POST"])
def project_delete(request: HttpRequest, slug: str) -> HttpResponse:
    project = _project(request, slug)
    confirm = request.POST.get("confirm", "")

    def delete() -> None:
        if confirm != project.slug:
            # the role is checked first, so a non-owner learns they cannot delete, not that they mistyped
            if membership_role(user=request.user, project=project) == Membership.Role.OWNER:
                raise BadInput(f"Type the project's slug ({project.slug}) to confirm.", field="confirm")
        membership.delete_project(user=request.user, project=project)

    return _act(request, project, delete, f"Project {project.slug} deleted.", form={"confirm": confirm},
                then="home")


@login_required
@require_http_methods(["POST"])
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    project = _project(request, slug)
    email, role = request.POST.get("email", ""), request.POST.get("role", Membership.Role.VIEWER)
    return _act(request, project,
                lambda: membership.add_member(user=request.user, project=project, email=email, role=role),
                f"{email.strip()} added as {role}.", form={"email": email, "role": role})


@login_required
@require_http_methods(["POST"])
def member_role(request: HttpRequest, slug: str, member_id: int) -> HttpResponse:
    project = _project(request, slug)
    role = request.POST.get("role", "")
    return _act(request, project, lambda: membership.change_role(user=request.user, project=project,
                                                                 membership_id=member_id, role=role),
                "Role changed.")


@login_required
@require_http_methods(["POST"])
def member_remove(request: HttpRequest, slug: str, member_id: int) -> HttpResponse:
    project = _project(request, slug)
    leaving = Membership.objects.filter(pk=member_id, project=project, user=request.user).exists()
    return _act(request, project, lambda: membership.remove_member(user=request.user, project=project,
                                                                   membership_id=member_id),
                f"You left {project.slug}." if leaving else "Member removed.", then="home" if leaving else None)


@login_required
@require_http_methods(["POST"])
def dataset_delete(request: HttpRequest, slug: str, dataset_id: int) -> HttpResponse:
    project = _project(request, slug)

    def delete() -> None:
        dataset = Dataset.objects.filter(pk=dataset_id, project=project).select_related("project").first()
        if dataset is None:
            raise NotFound("Dataset not found.")
        delete_dataset(user=request.user, dataset=dataset)

    return _act(request, project, delete, "Dataset deleted.")


@login_required
@require_http_methods(["POST"])
def share_revoke(request: HttpRequest, slug: str, share_id: int) -> HttpResponse:
    """A share into this project or of one of its datasets; revoke_share checks the caller owns either side."""
    project = _project(request, slug)

    def revoke() -> None:
        sharing.revoke_share(user=request.user, share_id=share_id, project=project)

    return _act(request, project, revoke, "Share revoked.")
