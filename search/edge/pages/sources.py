"""The dataset page's source forms: set a git or web source, remove it, sync now.

Why pages: a team with only a browser must be able to point a dataset at its repository or documentation site.
Each POST is CSRF-protected, turns the form into the same body the API takes and calls the same service
(search.sources.sync), so a bad source is refused with the same sentence and `field`; the dataset page
(search.edge.pages.content) shows the source, the schedule, the last error and the sync history.
"""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from config.errors import ApiError
from config.fields import check_text, parse_int
from config.ratelimits import enforce
from search.edge.pages.content import _dataset, _page
from search.ingest import content
from search.sources import sync

_INTS = ("max_pages", "max_depth")


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


def source_from_form(form: QueryDict) -> tuple[dict[str, Any], int | None, str | None]:
    """(source, interval_s, token) as the API body would carry them, from the page's form.

    Empty optional fields are left out so the service applies its defaults; a blank token keeps the stored one
    and the "remove token" box clears it."""
    for name, value in form.items():
        check_text(value, field=name)
    kind = form.get("type", "git")
    raw: dict[str, Any] = {"type": kind}
    if kind == "git":
        raw["url"] = form.get("url", "")
        for name in ("ref", "subdir"):
            if form.get(name, "").strip():
                raw[name] = form[name]
    else:
        raw["seeds"] = _lines(form.get("seeds", ""))
        raw["scope"] = form.get("scope") or "same-host"
        for name in _INTS:
            if form.get(name, "").strip():
                raw[name] = parse_int(form[name], field=f"source.{name}", lo=0, hi=10**9)
        for name in ("include", "exclude"):
            if form.get(name, "").strip():
                raw[name] = _lines(form[name])
    interval = form.get("interval_s", "").strip()
    interval_s = parse_int(interval, field="interval_s", lo=0, hi=10**9) if interval else None
    token = "" if form.get("clear_token") else (form.get("token") or None)
    return raw, interval_s, token


@login_required
@require_http_methods(["POST"])
def source_save(request: HttpRequest, slug: str, dataset_id: int) -> HttpResponse:
    dataset = _dataset(request, slug, dataset_id)
    try:
        enforce(request, group="ingest")
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        raw, interval_s, token = source_from_form(request.POST)
        sync.configure_source(user=request.user, dataset=dataset, raw=raw, interval_s=interval_s, token=token)
    except ApiError as exc:
        return _page(request, dataset, error=exc, source_form=request.POST)
    messages.success(request, "Source saved. Sync it now, or let the schedule do it.")
    return redirect("dataset-page", slug=slug, dataset_id=dataset.pk)


@login_required
@require_http_methods(["POST"])
def source_remove(request: HttpRequest, slug: str, dataset_id: int) -> HttpResponse:
    dataset = _dataset(request, slug, dataset_id)
    try:
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        sync.remove_source(user=request.user, dataset=dataset)
    except ApiError as exc:
        return _page(request, dataset, error=exc)
    messages.success(request, "The dataset no longer follows a source; its documents stay.")
    return redirect("dataset-page", slug=slug, dataset_id=dataset.pk)


@login_required
@require_http_methods(["POST"])
def sync_now(request: HttpRequest, slug: str, dataset_id: int) -> HttpResponse:
    dataset = _dataset(request, slug, dataset_id)
    try:
        enforce(request, group="ingest")
        dataset = content.dataset_of(user=request.user, slug=slug, dataset_id=dataset_id, write=True)
        sync.start_sync(dataset=dataset, user=request.user, trigger="manual")
    except ApiError as exc:
        return _page(request, dataset, error=exc)
    messages.success(request, "Sync queued; its progress shows under Ingest jobs.")
    return redirect("dataset-page", slug=slug, dataset_id=dataset.pk)
