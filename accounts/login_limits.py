"""Failed logins are limited per account and per client address, on every path that logs in with a password.

Why an authentication backend: the site's login page, /admin/login/ and any later caller of
django.contrib.auth.authenticate() all go through AUTHENTICATION_BACKENDS, so a limit enforced there cannot be
walked around by picking another door. LoginLimitBackend comes first and only refuses: when either bucket is full it
raises PermissionDenied, which stops authenticate() before any password is checked (so even the right password is
refused until the window ends); otherwise it steps aside for ModelBackend.

What is counted: failures only (Django's user_login_failed signal), in two buckets: the address typed (lower-cased
and hashed, whether or not an account has it, so a refusal says nothing about which addresses are registered) and
the client address. A success counts nothing. Rates are RATE_LIMITS["login_account"] and ["login_ip"].

The forms below turn the refusal into a clear message; the views (accounts/pages.py) answer it with 429.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import PermissionDenied, ValidationError

from config.errors import RateLimited
from config.ratelimits import check_key, count_key

if TYPE_CHECKING:
    from django.http import HttpRequest

RETRY_ATTR = "login_retry_after"  # set on the request when a login was refused for its limits


def throttled_message(*, retry_after: int) -> str:
    minutes = max(1, -(-retry_after // 60))
    return (f"Too many failed logins for this account or from your network. Try again in {minutes} minute"
            f"{'s' if minutes != 1 else ''}, or reset your password.")


def _account_key(username: str) -> str:
    return hashlib.sha256(username.strip().lower().encode()).hexdigest()


def _caller_key(request: HttpRequest) -> str:
    """The client address as configured for every limit (RATELIMIT_IP_META_KEY); empty: one shared bucket."""
    meta = settings.RATELIMIT_IP_META_KEY or "REMOTE_ADDR"
    return str(request.META.get(meta) or "0.0.0.0")


def check_login_allowed(*, request: HttpRequest, username: str) -> None:
    """RateLimited when the account's or the client's failed logins fill their bucket; counts nothing."""
    check_key(request, group="login_account", key=_account_key(username))
    check_key(request, group="login_ip", key=_caller_key(request))


def record_login_failure(*, request: HttpRequest, username: str) -> None:
    count_key(request, group="login_account", key=_account_key(username))
    count_key(request, group="login_ip", key=_caller_key(request))


class LoginLimitBackend:
    """First in AUTHENTICATION_BACKENDS: refuses (PermissionDenied) a login over its limits, else steps aside.
    It never returns a user, so it has no get_user: sessions stay ModelBackend's (as before this backend)."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> None:
        if request is None or not isinstance(username, str):
            return None
        try:
            check_login_allowed(request=request, username=username)
        except RateLimited as exc:
            setattr(request, RETRY_ATTR, int(exc.extra.get("retry_after") or 60))
            raise PermissionDenied(exc.detail) from None
        return None


def on_login_failed(sender: Any, credentials: dict, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """user_login_failed receiver (connected in AccountsConfig.ready): count a failure that checked a password.
    A refusal for the limits is not counted again: the window ends when it was going to."""
    if request is None or getattr(request, RETRY_ATTR, None) is not None:
        return
    username = credentials.get("username")
    if isinstance(username, str):
        record_login_failure(request=request, username=username)


class _LimitedLoginMixin:
    """A refused login shows why (not "wrong password") in `throttled`, and as the form's error."""

    throttled: str | None = None

    def clean(self) -> dict:
        try:
            return super().clean()  # type: ignore[misc]
        except ValidationError:
            retry = getattr(self.request, RETRY_ATTR, None)  # type: ignore[attr-defined]
            if retry is None:
                raise
            self.throttled = throttled_message(retry_after=retry)
            raise ValidationError(self.throttled, code="throttled") from None


class LimitedAuthenticationForm(_LimitedLoginMixin, AuthenticationForm):
    pass


class LimitedAdminAuthenticationForm(_LimitedLoginMixin, AdminAuthenticationForm):
    pass
