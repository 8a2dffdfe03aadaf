"""Self-serve sign-up: one service for POST /api/signup and the /accounts/signup/ page.

Why one function: both must apply the same rules, in the same order, or one becomes the way around the other:
- the server may turn sign-up off (`ALLOW_SIGNUP`): 403 signup_disabled;
- the email must be a valid address and not taken in any letter case (409 email_taken; emails are stored
  lower-cased, and the unique index settles a race between two sign-ups);
- the password passes Django's AUTH_PASSWORD_VALIDATORS (length, similarity to the email and name, common
  passwords, all digits): 400 naming `password`;
- a new account starts with `SIGNUP_FREE_CREDITS` credits, granted through the ledger in the same transaction.
Rate limiting needs the request, so the callers do it, both through `enforce_signup_rate`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction

from config.errors import BadInput, Conflict, Forbidden

if TYPE_CHECKING:
    from django.http import HttpRequest

    from accounts.models import User
from config.fields import check_text

EMAIL_MAX = 254
NAME_MAX = 200
PASSWORD_MAX = 1024  # hashing cost grows with length; nobody types more


def enforce_signup_rate(request: HttpRequest) -> None:
    """Count a sign-up attempt against the caller's address in the "signup" group (429 when over).

    A WSGI server need not set REMOTE_ADDR (and behind a proxy on a unix socket it is empty); django-ratelimit
    then cannot key the request and config.ratelimits.enforce reports a 503. Sign-up is anonymous, so such
    requests share one bucket instead: still limited, and the stricter choice."""
    from config.ratelimits import enforce

    if not settings.RATELIMIT_IP_META_KEY and not request.META.get("REMOTE_ADDR"):
        request.META["REMOTE_ADDR"] = "0.0.0.0"
    enforce(request, group="signup")


def require_signup_allowed() -> None:
    """403 signup_disabled when the server has sign-up off; callers check it before counting the rate limit."""
    if not settings.ALLOW_SIGNUP:
        raise Forbidden("Sign-up is disabled on this server; ask an administrator for an account.",
                        code="signup_disabled")


def sign_up(*, email: str, password: str, name: str = "") -> User:
    """Create an active, non-staff account and return it. Nothing is written when any rule refuses."""
    require_signup_allowed()
    for field, value in (("email", email), ("password", password), ("name", name)):
        if not isinstance(value, str):
            raise BadInput(f"{field} must be text.", field=field)
        check_text(value, field=field)
    email = email.strip().lower()
    name = name.strip()
    if not email:
        raise BadInput("email is required.", field="email")
    if len(email) > EMAIL_MAX:
        raise BadInput(f"email must be at most {EMAIL_MAX} characters.", field="email")
    try:
        validate_email(email)
    except ValidationError:
        raise BadInput("Enter a valid email address.", field="email") from None
    if len(name) > NAME_MAX:
        raise BadInput(f"name must be at most {NAME_MAX} characters.", field="name")
    if not password:
        raise BadInput("password is required.", field="password")
    if len(password) > PASSWORD_MAX:
        raise BadInput(f"password must be at most {PASSWORD_MAX} characters.", field="password")

    User = get_user_model()  # noqa: N806
    taken = Conflict("An account with this email already exists; log in instead.", field="email",
                     code="email_taken")
    if User.objects.filter(email__iexact=email).exists():
        raise taken
    try:
        validate_password(password, user=User(email=email, name=name))
    except ValidationError as exc:
        raise BadInput(" ".join(exc.messages), field="password") from None

    credits = int(settings.SIGNUP_FREE_CREDITS or 0)
    try:
        with transaction.atomic():
            user = User.objects.create_user(email=email, password=password, name=name)
            if credits > 0:
                from credits.ledger import grant

                grant(user=user, amount=credits, reason="signup")
    except IntegrityError:  # a concurrent sign-up with the same email won
        raise taken from None
    return user
