"""Password reset: the request only checks and enqueues; the worker finds the account and sends the mail.

Why split: done in the request (Django's PasswordResetView), looking the address up, making a token and talking to
the mail server took ~400 ms for a registered address and ~13 ms for an unknown one, which tells anyone who has an
account; and each request sent a mail at once. Here the request path is the same for every address (check its
shape, count it, enqueue) and the task (accounts.tasks.send_password_reset) does the rest. An unknown address, an
inactive account or one without a usable password gets no mail, as before.

Limits (the callers count them, through enforce_reset_rate): RATE_LIMITS["password_reset"] per caller and
["password_reset_address"] per address asked for, registered or not.
"""
from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING

from celery import current_app
from django.conf import settings
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.tokens import default_token_generator
from django.core.mail import send_mail
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.signup import clean_email
from config.errors import BadInput, DependencyDown
from config.fields import check_text
from config.ratelimits import enforce, enforce_key

if TYPE_CHECKING:
    from django.http import HttpRequest

log = logging.getLogger(__name__)
TASK = "accounts.send_password_reset"
RESET_SENT = ("If this address has an account, an email with a link to choose a new password is on its way. "
              "Nothing changes until the link is used.")


def clean_reset_email(*, email: object) -> str:
    """The address as stored (trimmed, lower-cased); 400 naming `email` when it is not one."""
    if not isinstance(email, str):
        raise BadInput("email must be text.", field="email")
    check_text(email, field="email")
    return clean_email(email=email)


def enforce_caller_rate(request: HttpRequest) -> None:
    """Count the request against its caller (429 when over); no client address: one shared bucket, as sign-up."""
    if not settings.RATELIMIT_IP_META_KEY and not request.META.get("REMOTE_ADDR"):
        request.META["REMOTE_ADDR"] = "0.0.0.0"
    enforce(request, group="password_reset")


def enforce_address_rate(request: HttpRequest, *, email: str) -> None:
    """Count the request against the address it names, registered or not (429 when over)."""
    enforce_key(request, group="password_reset_address", key=hashlib.sha256(email.encode()).hexdigest())


def start_password_reset(*, email: str, link_base: str) -> None:
    """Enqueue the mail: the same work whether or not the address has an account (no lookup here)."""
    try:
        current_app.send_task(TASK, kwargs={"email": email, "link_base": link_base})
    except Exception as exc:  # the broker: nothing was sent, say so rather than "check your email"
        log.warning("could not enqueue a password reset: %s", exc)
        raise DependencyDown("redis", "The mail queue (redis) is unavailable; try again shortly.") from exc


def send_password_reset(*, email: str, link_base: str) -> int:
    """In the worker: mail a reset link to each active account of `email` with a usable password; how many."""
    sent = 0
    hours = settings.PASSWORD_RESET_TIMEOUT // 3600
    for user in PasswordResetForm().get_users(email):
        uid = urlsafe_base64_encode(force_bytes(user.pk))
        token = default_token_generator.make_token(user)
        link = link_base + reverse("password_reset_confirm", kwargs={"uidb64": uid, "token": token})
        body = (f"Someone (perhaps you) asked to reset the password of {user.email}.\n\n"
                f"Open this link to choose a new one; it works for {hours} hours and only once:\n\n{link}\n\n"
                f"If it was not you, ignore this email: your password stays as it is.\n")
        send_mail("Reset your password on the search platform", body, settings.DEFAULT_FROM_EMAIL, [user.email])
        sent += 1
    return sent
