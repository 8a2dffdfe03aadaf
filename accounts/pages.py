"""The sign-up page: the same service as POST /api/signup, then a session login.

Why a page: people reach the platform in a browser first; the login page links here. The form is
CSRF-protected (Django's middleware), rate limited in the same "signup" group as the API, and shows an
ApiError's detail with its HTTP status.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.signup import enforce_signup_rate, require_signup_allowed, sign_up
from config.errors import ApiError, BadInput


@require_http_methods(["GET", "POST"])
def signup_page(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    form = {"email": request.POST.get("email", ""), "name": request.POST.get("name", "")}
    ctx = {"form": form, "error": None, "enabled": bool(settings.ALLOW_SIGNUP)}
    status = 200 if ctx["enabled"] else 403
    if request.method == "POST":
        try:
            require_signup_allowed()
            enforce_signup_rate(request)
            password = request.POST.get("password", "")
            if password != request.POST.get("password2", ""):
                raise BadInput("The two passwords differ.", field="password2")
            user = sign_up(email=form["email"], password=password, name=form["name"])
        except ApiError as exc:
            ctx["error"] = {"code": exc.code, "detail": exc.detail, "field": exc.field}
            return render(request, "registration/signup.html", ctx, status=exc.status_code)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(settings.LOGIN_REDIRECT_URL)
    return render(request, "registration/signup.html", ctx, status=status)
