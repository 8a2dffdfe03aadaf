"""The sign-up, login and password-reset pages: the same services as the API, then a session login.

Why pages: people reach the platform in a browser first; the login page links here. The forms are CSRF-protected
(Django's middleware), rate limited in the same "signup" group as the API, and show an ApiError's detail with its
HTTP status. The sign-up form answers "check your email" whether or not the address has an account; the emailed
link opens a page that asks for the sign-up's password and (a POST: reads never write) creates the account and
logs in.

Login (the site's and /admin/login/) is Django's LoginView with accounts.login_limits' forms: a login refused for
too many failures answers 429 with Retry-After and says why. Password reset enqueues its mail
(accounts/password_reset.py) and answers the same for every address.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import login
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from accounts.login_limits import RETRY_ATTR, LimitedAuthenticationForm
from accounts.password_reset import (
    RESET_SENT,
    clean_reset_email,
    enforce_address_rate,
    enforce_caller_rate,
    start_password_reset,
)
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
    """GET shows whose account the link creates and asks for the sign-up's password; POST checks it, creates the
    account and logs in (never without the password: see accounts.signup._proven)."""
    ctx: dict = {"token": token, "error": None, "email": None}
    try:
        require_signup_allowed()
        ctx["email"] = pending_for(token).email
        if request.method == "POST":
            enforce_signup_rate(request)
            user = confirm_sign_up(token=token, password=request.POST.get("password", ""))
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect(settings.LOGIN_REDIRECT_URL)
    except ApiError as exc:
        ctx["error"] = {"code": exc.code, "detail": exc.detail, "field": exc.field}
        return render(request, "registration/signup_confirm.html", ctx, status=exc.status_code)
    return render(request, "registration/signup_confirm.html", ctx)


def _limited(response: HttpResponse, request: HttpRequest) -> HttpResponse:
    """A login refused for its limits answers 429 with Retry-After (the form already says why)."""
    retry = getattr(request, RETRY_ATTR, None)
    if retry is not None:
        response.status_code = 429
        response["Retry-After"] = str(retry)
    return response


_site_login = LoginView.as_view(authentication_form=LimitedAuthenticationForm)


def login_page(request: HttpRequest) -> HttpResponse:
    """/accounts/login/: Django's LoginView with failed logins limited (accounts/login_limits.py)."""
    try:
        return _limited(_site_login(request), request)
    except ApiError as exc:  # the limits' counter (redis) is down: no login rather than an unlimited one
        return render(request, "registration/login.html", {"form": LimitedAuthenticationForm(request),
                                                           "unavailable": exc.detail}, status=exc.status_code)


def admin_login(request: HttpRequest) -> HttpResponse:
    """/admin/login/: the admin site's own login view, with the same limits (admin.site.login_form, set in
    accounts/admin.py, says why)."""
    try:
        return _limited(admin.site.login(request), request)
    except ApiError as exc:
        return HttpResponse(exc.detail, status=exc.status_code, content_type="text/plain; charset=utf-8")


@require_http_methods(["GET", "POST"])
def password_reset_page(request: HttpRequest) -> HttpResponse:
    """/accounts/password_reset/: counts the caller and the address, enqueues the mail, then the "sent" page;
    the same for every address (no lookup here)."""
    ctx: dict = {"email": request.POST.get("email", ""), "error": None}
    if request.method == "POST":
        try:
            enforce_caller_rate(request)
            email = clean_reset_email(email=ctx["email"])
            enforce_address_rate(request, email=email)
            start_password_reset(email=email, link_base=link_base(request))
        except ApiError as exc:
            ctx["error"] = {"code": exc.code, "detail": exc.detail, "field": exc.field}
            response = render(request, "registration/password_reset_form.html", ctx, status=exc.status_code)
            for name, value in exc.headers.items():
                response[name] = value
            return response
        return redirect(reverse("password_reset_done"))
    return render(request, "registration/password_reset_form.html", {**ctx, "sent_note": RESET_SENT})
