"""The "API keys" page: list your keys (scopes, projects, expiry, last use), create one, revoke one.

It calls the same services as POST /api/keys and DELETE /api/keys/<id> (accounts/apikeys.py), from a session,
so it may issue any scope. The secret is rendered once, in the response to the create POST (no-store), and never
again. Forms are CSRF-protected by Django's middleware.
"""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.apikeys import MAX_EXPIRY_DAYS, create_api_key, project_slugs, revoke_api_key
from accounts.models import SCOPE_HELP, SCOPES, ApiKey, User
from config.errors import ApiError, BadInput
from config.fields import check_text, parse_int
from projects.sharing import projects_of


def _rows(user: User) -> list[dict[str, Any]]:
    return [{"key": k, "projects": project_slugs(k)} for k in ApiKey.objects.filter(user=user)]


def _create(request: HttpRequest) -> Any:
    post = request.POST
    name = check_text(post.get("name", "").strip() or "default", field="name")
    if len(name) > 100:
        raise BadInput("At most 100 characters.", field="name")
    scopes = [check_text(s, field="scopes") for s in post.getlist("scopes")]
    if not scopes:
        raise BadInput("Choose at least one scope.", field="scopes")
    projects = [check_text(p, field="projects") for p in post.getlist("projects")] or None
    days_raw = post.get("expires_in_days", "").strip()
    days = parse_int(days_raw, field="expires_in_days", lo=1, hi=MAX_EXPIRY_DAYS) if days_raw else None
    return create_api_key(user=request.user, name=name, scopes=scopes, projects=projects, expires_in_days=days)


@login_required
@require_http_methods(["GET", "POST"])
def keys_page(request: HttpRequest) -> HttpResponse:
    ctx: dict[str, Any] = {"issued": None, "error": None, "scopes": [(s, SCOPE_HELP[s]) for s in SCOPES],
                           "projects": projects_of(user=request.user), "max_days": MAX_EXPIRY_DAYS,
                           "form": {"name": "", "scopes": list(SCOPES), "projects": [], "expires_in_days": ""}}
    status = 200
    if request.method == "POST":
        ctx["form"] = {"name": request.POST.get("name", ""), "scopes": request.POST.getlist("scopes"),
                       "projects": request.POST.getlist("projects"),
                       "expires_in_days": request.POST.get("expires_in_days", "")}
        try:
            issued = _create(request)
            ctx["issued"] = {"key": issued.api_key, "secret": issued.secret}
            ctx["form"] = {"name": "", "scopes": list(SCOPES), "projects": [], "expires_in_days": ""}
            status = 201
        except ApiError as exc:
            ctx["error"] = {"code": exc.code, "detail": exc.detail, "field": exc.field}
            status = exc.status_code
    ctx["keys"] = _rows(request.user)
    resp = render(request, "pages/api_keys.html", ctx, status=status)
    resp["Cache-Control"] = "no-store"  # the secret may be in this page
    return resp


@login_required
@require_http_methods(["POST"])
def revoke_key_page(request: HttpRequest, key_id: int) -> HttpResponse:
    key = ApiKey.objects.filter(pk=key_id, user=request.user).first()
    if key is None:
        raise Http404("API key not found.")
    revoke_api_key(api_key=key)
    messages.success(request, f"Revoked key {key.prefix}… ({key.name}).")
    return redirect("account-keys")
