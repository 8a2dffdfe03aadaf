"""Server-rendered content pages: add a dataset, upload files or archives into it with a live progress bar,
see and delete its documents.

Why pages: a team with only a browser must be able to bring its own content in. Every POST is CSRF-protected
and calls the same services as the API (search.ingest.sharing.create_dataset, search.ingest.content.upload and
delete_document); the progress bar reads the same job endpoint a frontend polls (/api/ingest-jobs/{id},
session-authenticated) and, without JavaScript, the page refreshes itself while a job runs.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from config.errors import ApiError, BadInput, NotFound
from config.ratelimits import enforce
from projects import quotas
from projects.access import membership_role, project_for_member
from search.ingest import content
from search.ingest.sharing import create_dataset
from search.models import Dataset, Document, IngestJob
from search.sources import sync


def _dataset(request: HttpRequest, slug: str, dataset_id: int) -> Dataset:
    try:
        return content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id)
    except NotFound:
        raise Http404("Dataset not found.") from None


def _page(request: HttpRequest, dataset: Dataset, *, error: ApiError | None = None,
          source_form: Any = None) -> HttpResponse:
    """The dataset page; after a refused form, `error` says why and `source_form` refills the source form."""
    jobs = list(IngestJob.objects.filter(dataset=dataset).order_by("-created_at")[:5])
    ctx: dict[str, Any] = {
        "dataset": dataset, "project": dataset.project,
        "can_edit": membership_role(user=request.user, project=dataset.project) in ("owner", "editor"),
        "documents": Document.objects.filter(dataset=dataset).annotate(chunk_count=Count("chunks")).order_by("path")[:200],
        "document_total": Document.objects.filter(dataset=dataset).count(),
        "jobs": jobs, "active": [j for j in jobs if j.status in ("pending", "running")],
        "quota": quotas.report(dataset.project),
        "error": {"detail": error.detail, "field": error.field, "code": error.code} if error else None,
        "source": sync.describe_source(dataset=dataset), "syncs": sync.sync_history(dataset=dataset, limit=10),
        "source_form": source_form, "local_paths_allowed": request.user.is_staff or settings.SOURCES_ALLOW_LOCAL_PATHS,
        "min_interval_s": settings.SOURCES_MIN_INTERVAL_S,
    }
    return render(request, "pages/dataset.html", ctx, status=error.status_code if error else 200)


@login_required
@require_http_methods(["GET"])
def dataset_page(request: HttpRequest, slug: str, dataset_id: int) -> HttpResponse:
    return _page(request, _dataset(request, slug, dataset_id))


@login_required
@require_http_methods(["POST"])
def dataset_create(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        project = project_for_member(user=request.user, slug=slug)
    except NotFound:
        raise Http404("Project not found.") from None
    try:
        kind = request.POST.get("kind", "code")
        dataset = create_dataset(user=request.user, project=project, name=request.POST.get("name", ""), kind=kind,
                                 description=request.POST.get("description", ""))
    except ApiError as exc:
        messages.error(request, f"Dataset not created: {exc.detail}")
        return redirect("project-settings", slug=project.slug)
    return redirect("dataset-page", slug=project.slug, dataset_id=dataset.pk)


@login_required
@require_http_methods(["POST"])
def dataset_upload(request: HttpRequest, slug: str, dataset_id: int) -> HttpResponse:
    dataset = _dataset(request, slug, dataset_id)
    try:
        enforce(request, group="ingest")
        upload = request.FILES.get("file")
        if upload is None:
            raise BadInput("Choose a file or an archive to upload.", field="file")
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        mode = request.POST.get("mode") or None
        content.upload(user=request.user, dataset=dataset, filename=upload.name, data=upload.read(), mode=mode)
    except ApiError as exc:
        return _page(request, dataset, error=exc)
    messages.success(request, f"Uploaded {upload.name}; ingesting it now.")
    return redirect("dataset-page", slug=slug, dataset_id=dataset.pk)


@login_required
@require_http_methods(["POST"])
def document_delete(request: HttpRequest, slug: str, dataset_id: int) -> HttpResponse:
    dataset = _dataset(request, slug, dataset_id)
    try:
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        out = content.delete_documents(user=request.user, dataset=dataset, paths=[request.POST.get("path", "")])
        if not out["deleted"]:
            raise NotFound("Document not found.")
    except ApiError as exc:
        return _page(request, dataset, error=exc)
    messages.success(request, "Document deleted.")
    return redirect("dataset-page", slug=slug, dataset_id=dataset.pk)
