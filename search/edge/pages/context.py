"""Server-rendered pages for context search and the rules lawyer.

Why here and not in api.py: pages authenticate by session and render HTML, but
call exactly the same services as the API (run_query, the answer stream), so
behaviour cannot drift between the two.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from config.errors import ApiError, BadInput, error_body
from config.fields import parse_int
from projects.access import project_for_member
from projects.sharing import projects_of
from search.edge.api.rules import encode_sse
from search.engine.access import accessible_dataset_ids, is_resource_accessible
from search.engine.packing import render_pack
from search.engine.page_links import document_bases
from search.engine.pages import cite, page_url
from search.engine.pipeline import QuerySpec, run_query
from search.models import Chunk
from search.quality.feedback import record_feedback
from search.rules.answer import stream_answer
from search.rules.search import RulesSpec, rules_search, validate_rules_params


def _numbered(text: str, start: int) -> list[tuple[int, str]]:
    return [(start + i, line) for i, line in enumerate(text.split("\n"))]


@login_required
@require_http_methods(["GET"])
def context_search(request: HttpRequest) -> HttpResponse:
    projects = [row["project"] for row in projects_of(user=request.user)]
    params = request.GET
    form = {
        "project": params.get("project") or (projects[0].slug if projects else ""),
        "q": params.get("q", ""),
        "repo": params.get("repo", ""),
        "path": params.get("path", ""),
        "lang": params.get("lang", ""),
        "include_global": params.get("include_global", "on" if "q" not in params else "") == "on",
    }
    ctx: dict[str, Any] = {"projects": projects, "form": form, "result": None, "error": None}
    status = 200
    if form["q"].strip():
        filters = {k: form[k] for k in ("repo", "path", "lang") if form[k].strip()}
        try:
            project = project_for_member(user=request.user, slug=form["project"])
            spec = QuerySpec(q=form["q"], filters=filters or None, include_global=form["include_global"],
                             source="page")
            result = run_query(user=request.user, project=project, spec=spec)
            for r in result.results:
                r["lines"] = _numbered(r["text"], r["start_line"])
            ctx["result"] = result
            ctx["pack_text"] = render_pack(result.pack)
        except ApiError as exc:
            ctx["error"] = {"code": exc.code, "detail": exc.detail, "field": exc.field}
            status = exc.status_code
    return render(request, "pages/context_search.html", ctx, status=status)


@login_required
@require_http_methods(["POST"])
def context_feedback(request: HttpRequest) -> HttpResponse:
    try:
        try:
            session_id = uuid.UUID(request.POST.get("session_id", ""))
        except ValueError as exc:
            raise BadInput("session_id must be a UUID.", field="session_id") from exc
        chunk_id = parse_int(request.POST.get("chunk_id", ""), field="chunk_id", lo=1)
        relevance = parse_int(request.POST.get("relevance", ""), field="relevance", lo=0, hi=3)
        record_feedback(user=request.user, session_id=session_id, chunk_id=chunk_id, relevance=relevance)
        message = "Thanks: feedback recorded."
        status = 200
    except ApiError as exc:
        message, status = f"Feedback not recorded: {exc.detail}", exc.status_code
    if request.headers.get("X-Requested-With") == "fetch":
        return HttpResponse(message, status=status, content_type="text/plain")
    back = request.POST.get("next") or "/search/"
    # `next` is user input: only a same-site path (not //host, /\\host or a scheme) may be followed

    if not back.startswith("/") or not url_has_allowed_host_and_scheme(back, allowed_hosts=None):
        back = "/search/"
    response = redirect(back)
    return response


def _rules_params(request: HttpRequest) -> dict[str, Any]:
    p = request.GET
    return {"project": p.get("project", ""), "q": p.get("q", ""), "book": p.get("book", ""),
            "graph": p.get("graph", "on" if "q" not in p else "") == "on"}


def _rules_search_fn(request: HttpRequest, form: dict[str, Any]) -> tuple[str, Callable[[], Any]]:
    """Validate, authorise and search now, before any stream opens, so every failure is a normal error."""
    project = project_for_member(user=request.user, slug=form["project"])
    spec = RulesSpec(**validate_rules_params({"q": form["q"], "book": form["book"] or None, "graph": form["graph"]}),
                     source="page")
    found = rules_search(user=request.user, project=project, spec=spec)
    return spec.q, (lambda: found)


def _rules_books(projects: list[Any]) -> list[str]:
    ids: set[int] = set()
    for p in projects:
        ids |= accessible_dataset_ids(p)
    return list(Chunk.objects.filter(dataset_id__in=ids, kind="rules").exclude(book_id="")
                .values_list("book_id", flat=True).distinct().order_by("book_id"))


@login_required
@require_http_methods(["GET"])
def rules_page(request: HttpRequest) -> HttpResponse:
    """With JavaScript the answer streams over EventSource; without it, the form renders the full answer."""
    projects = [row["project"] for row in projects_of(user=request.user)]
    form = _rules_params(request)
    form["project"] = form["project"] or (projects[0].slug if projects else "")
    ctx: dict[str, Any] = {"projects": projects, "form": form, "books": _rules_books(projects),
                           "answer": None, "error": None}
    status = 200
    if form["q"].strip() and request.GET.get("render") == "1":
        try:
            q, search_fn = _rules_search_fn(request, form)
            final: dict[str, Any] = {}
            for event, data in stream_answer(q=q, search=search_fn):
                if event in ("complete", "error"):
                    final = {"event": event, **data}
            ctx["answer"] = final
        except ApiError as exc:
            ctx["error"] = {"code": exc.code, "detail": exc.detail, "field": exc.field}
            status = exc.status_code
    return render(request, "pages/rules.html", ctx, status=status)


@login_required
@require_http_methods(["GET"])
def rules_stream(request: HttpRequest) -> HttpResponse:
    """GET twin of POST /api/projects/{slug}/answer, because EventSource can only GET."""
    try:
        q, search_fn = _rules_search_fn(request, _rules_params(request))
    except ApiError as exc:
        return JsonResponse(error_body(exc.code, exc.detail, exc.field, **exc.extra), status=exc.status_code)
    response = StreamingHttpResponse(encode_sse(stream_answer(q=q, search=search_fn)),
                                     content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


@login_required
@require_http_methods(["GET"])
def rules_chunk(request: HttpRequest, chunk_id: int) -> HttpResponse:
    """A cited section, shown only if one of the caller's projects may see it (404 otherwise)."""
    project = next((row["project"] for row in projects_of(user=request.user)
                    if is_resource_accessible(row["project"], "chunk", chunk_id)), None)
    if project is None:
        raise Http404("No such section.")
    chunk = Chunk.objects.select_related("document").get(pk=chunk_id)
    # the page link goes through a project that can read the chunk (its original is served to that project)
    base = document_bases(slug=project.slug, document_ids=[chunk.document_id]).get(chunk.document_id, "")
    return render(request, "pages/rules_chunk.html", {"chunk": chunk, "cite": cite(book=chunk.book_id, page=chunk.page),
                                                      "page_url": page_url(base=base, page=chunk.page)})
