"""Self-serve sign-up: one service for POST /api/signup and the /accounts/signup/ page, in two steps.

Why two steps: an answer that differs for a taken address (the old 409 email_taken) tells anyone whether an
address has an account. So sign_up checks the input, emails the address and answers the same either way; the
account is created by confirm_sign_up when the address's owner opens the link (POST /api/signup/confirm, or the
page at /accounts/signup/confirm/<token>), as account systems that care about enumeration do. Confirming asks for
the sign-up's password again: whoever opens a link gets an account only with a password they typed (_proven).

Why one function per step: the API and the page must apply the same rules, in the same order, or one becomes
the way around the other:
- the server may turn sign-up off (`ALLOW_SIGNUP`): 403 signup_disabled;
- the email must be a valid address (stored lower-cased; the unique index settles two confirmations racing);
- the password passes Django's AUTH_PASSWORD_VALIDATORS (length, similarity to the email and name, common
  passwords, all digits): 400 naming `password`;
- a confirmed account is announced (accounts.signals.account_confirmed) in the transaction that creates it:
  the credits app grants `SIGNUP_FREE_CREDITS` from it, so the account and its credits commit together.
Rate limiting needs the request, so the callers do it, both through `enforce_signup_rate`.
"""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password, make_password
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import PendingSignup
from accounts.signals import account_confirmed
from config.errors import BadInput, Conflict, Forbidden

if TYPE_CHECKING:
    from django.http import HttpRequest

    from accounts.models import User
from config.fields import check_text
from config.ratelimits import enforce

EMAIL_MAX = 254
NAME_MAX = 200
PASSWORD_MAX = 1024  # hashing cost grows with length; nobody types more


def enforce_signup_rate(request: HttpRequest) -> None:
    """Count a sign-up attempt against the caller's address in the "signup" group (429 when over).

    A WSGI server need not set REMOTE_ADDR (and behind a proxy on a unix socket it is empty); django-ratelimit
    then cannot key the request and config.ratelimits.enforce reports a 503. Sign-up is anonymous, so such
    requests share one bucket instead: still limited, and the stricter choice."""
    if not settings.RATELIMIT_IP_META_KEY and not request.META.get("REMOTE_ADDR"):
        request.META["REMOTE_ADDR"] = "0.0.0.0"
    enforce(request, group="signup")


def require_signup_allowed() -> None:
    """403 signup_disabled when the server has sign-up off; callers check it before counting the rate limit."""
    if not settings.ALLOW_SIGNUP:
        raise Forbidden("Sign-up is disabled on this server; ask an administrator for an account.",
                        code="signup_disabled")


CONFIRMATION_SENT = ("We sent an email to this address. Open its link to finish creating the account (or, if the "
                     "address already has one, the email says so). Nothing else changes until then.")


def link_base(request: HttpRequest) -> str:
    """Where emailed links point: SITE_URL, else this request's scheme and host (ALLOWED_HOSTS vetted it)."""
    return settings.SITE_URL or request.build_absolute_uri("/").rstrip("/")


def clean_email(*, email: str) -> str:
    """An address as stored (trimmed, lower-cased), checked for shape and length: 400 naming `email`. Sign-up and
    password reset read addresses the same way, so one address is one account and one rate-limit bucket."""
    email = email.strip().lower()
    if not email:
        raise BadInput("email is required.", field="email")
    if len(email) > EMAIL_MAX:
        raise BadInput(f"email must be at most {EMAIL_MAX} characters.", field="email")
    try:
        validate_email(email)
    except ValidationError:
        raise BadInput("Enter a valid email address.", field="email") from None
    return email


def _clean(*, email: str, password: str, name: str) -> tuple[str, str, str]:
    """The sign-up's fields checked as text, email shape and password strength: 400 naming the field."""
    for field, value in (("email", email), ("password", password), ("name", name)):
        if not isinstance(value, str):
            raise BadInput(f"{field} must be text.", field=field)
        check_text(value, field=field)
    email = clean_email(email=email)
    name = name.strip()
    if len(name) > NAME_MAX:
        raise BadInput(f"name must be at most {NAME_MAX} characters.", field="name")
    if not password:
        raise BadInput("password is required.", field="password")
    if len(password) > PASSWORD_MAX:
        raise BadInput(f"password must be at most {PASSWORD_MAX} characters.", field="password")
    User = get_user_model()  # noqa: N806
    try:
        validate_password(password, user=User(email=email, name=name))
    except ValidationError as exc:
        raise BadInput(" ".join(exc.messages), field="password") from None
    return email, password, name


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def sign_up(*, email: str, password: str, name: str = "", link_base: str) -> str:
    """Start a sign-up: checks the input (400s), then emails the address and returns the email as stored.

    The answer is the same whether or not the address has an account (no enumeration): a free address gets a link
    that creates the account (confirm_sign_up), a taken one a note that it already has an account. Both paths hash
    the password, so they also take the same time. Nothing about any account changes here."""
    require_signup_allowed()
    email, password, name = _clean(email=email, password=password, name=name)
    password_hash = make_password(password)  # on both paths: the time taken does not tell either
    now = timezone.now()
    PendingSignup.objects.filter(expires_at__lt=now).delete()
    taken = get_user_model().objects.filter(email__iexact=email).exists()
    if taken:
        body = (f"Someone (perhaps you) tried to sign up with {email}, which already has an account.\n\n"
                f"Log in at {link_base}/accounts/login/ instead. If it was not you, you can ignore this email: "
                f"nothing was changed.\n")
    else:
        token = secrets.token_urlsafe(32)
        PendingSignup.objects.create(email=email, name=name, password_hash=password_hash,
                                     token_hash=_hash_token(token),
                                     expires_at=now + timedelta(seconds=settings.SIGNUP_CONFIRM_MAX_AGE_S))
        hours = settings.SIGNUP_CONFIRM_MAX_AGE_S // 3600
        body = (f"Open this link to finish creating your account ({email}); it works for {hours} hours:\n\n"
                f"{link_base}/accounts/signup/confirm/{token}\n\n"
                f"API clients can POST the token to /api/signup/confirm instead: {{\"token\": \"{token}\"}}\n\n"
                f"If you did not sign up, ignore this email: no account is created.\n")
    send_mail("Your account on the search platform", body, settings.DEFAULT_FROM_EMAIL, [email])
    return email


def pending_for(token: str) -> PendingSignup:
    """The unexpired sign-up a token opens, or 400 invalid_token (an unknown, used or expired link alike)."""
    if not isinstance(token, str) or not 20 <= len(token) <= 100:
        raise BadInput("This sign-up link is not valid.", field="token", code="invalid_token")
    pending = PendingSignup.objects.filter(token_hash=_hash_token(token), expires_at__gte=timezone.now()).first()
    if pending is None:
        raise BadInput("This sign-up link is not valid any more (used, expired or mistyped); sign up again.",
                       field="token", code="invalid_token")
    return pending


def _proven(*, pending: PendingSignup, password: object) -> None:
    """400 wrong_password unless `password` is the one chosen at this link's sign-up.

    Why: anyone may sign up any address, so an address can hold pending sign-ups with several people's passwords
    (an attacker's first, its owner's next, or the other way round), each with a working link in the owner's
    inbox. A link that created the account with its own stored password would give the owner an account whose
    password the attacker knows. Asking the opener for the password means the account only ever gets a password
    the person holding the link typed: the attacker's link, opened by the owner, is refused."""
    if not isinstance(password, str) or not password or len(password) > PASSWORD_MAX:
        raise BadInput("Enter the password you chose when signing up.", field="password")
    if not check_password(password, pending.password_hash):
        raise BadInput("This is not the password chosen for this sign-up link. If the address was signed up more "
                       "than once, another email's link may be the one for your password; or sign up again.",
                       field="password", code="wrong_password")


def confirm_sign_up(*, token: str, password: object) -> User:
    """Create the account a sign-up link stands for once the opener proves the password chosen at that sign-up
    (_proven), in one transaction with what the apps above do when an account is confirmed (account_confirmed:
    the free credits); every pending sign-up of that address ends with it."""
    require_signup_allowed()
    pending = pending_for(token)
    _proven(pending=pending, password=password)
    User = get_user_model()  # noqa: N806
    try:
        with transaction.atomic():
            if User.objects.filter(email__iexact=pending.email).exists():
                raise IntegrityError
            user = User(email=pending.email, name=pending.name, password=pending.password_hash)
            user.save()
            account_confirmed.send(sender=User, user=user)
            PendingSignup.objects.filter(email=pending.email).delete()
    except IntegrityError:  # confirmed already (another link of the same address won): log in instead
        PendingSignup.objects.filter(email=pending.email).delete()
        raise Conflict("This address already has an account; log in instead.", field="token",
                       code="email_taken") from None
    return user
