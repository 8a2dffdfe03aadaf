"""Server-rendered "New project" page.

A project's settings page (members, datasets, shares, delete) shows search's rows, so search's edge serves it
(search.edge.pages.projects) with the same services. Every POST is CSRF-protected (Django's middleware; none is
exempt) and shows an ApiError's detail with its HTTP status, as the API answers it.
"""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from config.errors import ApiError
from projects import membership


def _error(exc: ApiError) -> dict[str, Any]:
    return {"code": exc.code, "status": exc.status_code, "detail": exc.detail, "field": exc.field}


@login_required
@require_http_methods(["GET", "POST"])
def project_new(request: HttpRequest) -> HttpResponse:
    form = {"name": request.POST.get("name", ""), "slug": request.POST.get("slug", "")}
    if request.method == "POST":
        try:
            project = membership.create_project(user=request.user, name=form["name"], slug=form["slug"] or None)
        except ApiError as exc:
            return render(request, "pages/project_new.html", {"form": form, "error": _error(exc)},
                          status=exc.status_code)
        messages.success(request, f"Project {project.name} created; you are its owner.")
        return redirect("project-settings", slug=project.slug)
    return render(request, "pages/project_new.html", {"form": form, "error": None})
