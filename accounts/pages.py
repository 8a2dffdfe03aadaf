"""The sign-up pages: the same services as POST /api/signup and /api/signup/confirm, then a session login.

Why pages: people reach the platform in a browser first; the login page links here. The forms are CSRF-protected
(Django's middleware), rate limited in the same "signup" group as the API, and show an ApiError's detail with its
HTTP status. The sign-up form answers "check your email" whether or not the address has an account; the emailed
link opens a page whose button (a POST: reads never write) creates the account and logs in.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.signup import (
    CONFIRMATION_SENT,
    confirm_sign_up,
    enforce_signup_rate,
    link_base,
    pending_for,
    require_signup_allowed,
    sign_up,
)
from config.errors import ApiError, BadInput


@require_http_methods(["GET", "POST"])
def signup_page(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    form = {"email": request.POST.get("email", ""), "name": request.POST.get("name", "")}
    ctx = {"form": form, "error": None, "enabled": bool(settings.ALLOW_SIGNUP), "sent": None}
    status = 200 if ctx["enabled"] else 403
    if request.method == "POST":
        try:
            require_signup_allowed()
            enforce_signup_rate(request)
            password = request.POST.get("password", "")
            if password != request.POST.get("password2", ""):
                raise BadInput("The two passwords differ.", field="password2")
            email = sign_up(email=form["email"], password=password, name=form["name"], link_base=link_base(request))
        except ApiError as exc:
            ctx["error"] = {"code": exc.code, "detail": exc.detail, "field": exc.field}
            return render(request, "registration/signup.html", ctx, status=exc.status_code)
        ctx["sent"] = {"email": email, "detail": CONFIRMATION_SENT}
    return render(request, "registration/signup.html", ctx, status=status)


@require_http_methods(["GET", "POST"])
def signup_confirm_page(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows whose account the link creates and a button; POST creates it and logs in."""
    ctx: dict = {"token": token, "error": None, "email": None}
    try:
        require_signup_allowed()
        ctx["email"] = pending_for(token).email
        if request.method == "POST":
            enforce_signup_rate(request)
            user = confirm_sign_up(token=token)
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect(settings.LOGIN_REDIRECT_URL)
    except ApiError as exc:
        ctx["error"] = {"code": exc.code, "detail": exc.detail, "field": exc.field}
        return render(request, "registration/signup_confirm.html", ctx, status=exc.status_code)
    return render(request, "registration/signup_confirm.html", ctx)
