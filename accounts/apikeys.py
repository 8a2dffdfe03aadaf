"""API keys: create (secret shown once, with scopes, a project limit and an expiry), verify, revoke.

A key's project limit is a list of project ids. What they stand for (which slugs, which of them the user is a
member of) is the projects app's knowledge, and accounts sits below projects: so projects installs its answers
when it starts (`use_key_projects`, called from projects/apps.py) instead of accounts importing it."""
from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts import limits
from accounts.models import SCOPES, ApiKey, User
from config.errors import BadInput, InsufficientScope

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser
    from django.db.models import QuerySet

KEY_PREFIX = "sk_"
MAX_EXPIRY_DAYS = 3650


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    secret: str  # the only time the full secret exists outside the caller


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class KeyProjects:
    """The two questions a key's project limit asks of the app that owns projects (projects/keys.py answers)."""

    member_ids: Callable[..., dict[str, int]]  # (user=, slugs=) -> {slug: id} of the user's projects among slugs,
    #                                             within the request's own key limit (key_project_ids)
    slugs: Callable[..., list[str]]  # (ids=) -> the slugs of those projects that still exist, sorted


_key_projects: dict[str, KeyProjects] = {}


def use_key_projects(projects: KeyProjects) -> None:
    """Called once by the projects app when it starts."""
    _key_projects["installed"] = projects


def _projects() -> KeyProjects:
    try:
        return _key_projects["installed"]
    except KeyError:
        raise ImproperlyConfigured("API keys' project limits need the projects app in INSTALLED_APPS") from None


def key_project_ids(user: User | AnonymousUser) -> frozenset[int] | None:
    """The projects the request's API key is limited to; None = no limit (a session, or an unlimited key).

    ApiKeyAuthentication sets it on the request's user object (accounts/authentication.py), so every helper that
    takes a user applies it (projects.access): to a limited key another project of the same user is as invisible
    as a project it is not a member of."""
    return getattr(user, "_key_project_ids", None)


class KeyExpired(Exception):
    """The secret is right but the key's expires_at has passed (the API answers 401 key_expired)."""


def issue_api_key(*, user: User, name: str = "default", scopes: Iterable[str] | None = None,
                  projects: Iterable | None = None, expires_at: datetime | None = None) -> IssuedKey:
    """Issue a key. `scopes` None = every scope; `projects` (Project instances or ids) None = every project
    of the user; `expires_at` None = never. Callers validate who may ask for what (the API and the page)."""
    scope_list = list(SCOPES) if scopes is None else [s for s in SCOPES if s in set(scopes)]
    if not scope_list or (scopes is not None and set(scopes) - set(SCOPES)):
        raise ValueError(f"scopes must be a non-empty subset of {SCOPES}")
    project_ids = None if projects is None else sorted({getattr(p, "pk", p) for p in projects})
    prefix = secrets.token_hex(6)
    secret = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(user=user, name=name, prefix=prefix, key_hash=_hash(secret), scopes=scope_list,
                                project_ids=project_ids, expires_at=expires_at)
    return IssuedKey(api_key=key, secret=secret)


def verify_api_key(*, secret: str) -> ApiKey | None:
    """Return the active key for this secret, stamping last_used_at; None if wrong or revoked.

    Raises KeyExpired for a right secret whose key has expired (a distinct 401, so a client knows to rotate)."""
    if not secret.startswith(KEY_PREFIX):
        return None
    try:
        prefix = secret[len(KEY_PREFIX):].split("_", 1)[0]
    except IndexError:
        return None
    key = ApiKey.objects.select_related("user").filter(prefix=prefix).first()
    if key is None or not hmac.compare_digest(key.key_hash, _hash(secret)):
        return None
    if key.revoked_at is not None or not key.user.is_active:
        return None
    if key.is_expired:
        raise KeyExpired(key.prefix)
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def keys_visible_to(*, user: User) -> QuerySet[ApiKey]:
    """The user's keys that this request may list and revoke. A project-limited API key sees only keys limited
    within its own projects (so other projects' slugs do not leak through key listings); others see every key."""
    keys = ApiKey.objects.filter(user=user)
    ids = key_project_ids(user)
    return keys if ids is None else keys.filter(project_ids__contained_by=sorted(ids))


def project_slugs(api_key: ApiKey) -> list[str] | None:
    """The slugs of the key's project limit (None = no limit); a deleted project drops out, the limit stays."""
    if api_key.project_ids is None:
        return None
    return _projects().slugs(ids=list(api_key.project_ids))


def create_api_key(*, user: User, creator: ApiKey | None = None, name: str = "default",
                   scopes: list[str] | None = None, projects: list[str] | None = None,
                   expires_at: datetime | None = None, expires_in_days: int | None = None) -> IssuedKey:
    """Issue a key on behalf of a user, from the API or the keys page (inputs already shaped by a serializer).

    `projects` are slugs of projects the user is a member of (400 `projects` otherwise). A key created by
    another key (`creator`, which has the manage scope) cannot exceed it: its scopes are a subset of the
    creator's (403 insufficient_scope otherwise), its projects lie within the creator's limit (others are
    unknown to it: 400), and it expires no later than the creator. Omitted values default to the creator's.
    Past the account's limit of active keys (accounts.limits) it is 409 account_limit.
    """
    now = timezone.now()
    if scopes is not None:
        unknown = sorted(set(scopes) - set(SCOPES))
        if unknown or not scopes:
            raise BadInput(f"scopes must be a non-empty subset of {', '.join(SCOPES)}.", field="scopes")
    if creator is not None:
        if scopes is None:
            scopes = list(creator.scopes)
        beyond = [s for s in SCOPES if s in scopes and not creator.has_scope(s)]
        if beyond:
            raise InsufficientScope(f"A key cannot issue a key with more scopes than its own (it lacks {beyond[0]!r}).",
                                    field="scopes", extra={"required_scope": beyond[0]})
    project_ids = None
    if projects is not None:
        if not projects:
            raise BadInput("Give at least one project slug, or omit projects for every project.", field="projects")
        found = _projects().member_ids(user=user, slugs=list(projects))
        missing = [slug for slug in projects if slug not in found]
        if missing:
            raise BadInput(f"Not a project you are a member of: {missing[0]!r}.", field="projects")
        project_ids = sorted(set(found.values()))
    elif creator is not None and creator.project_ids is not None:
        project_ids = list(creator.project_ids)
    if expires_in_days is not None:
        if not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
            raise BadInput(f"Must be between 1 and {MAX_EXPIRY_DAYS}.", field="expires_in_days")
        expires_at = now + timedelta(days=expires_in_days)
    elif expires_at is not None:
        if expires_at <= now:
            raise BadInput("Must be in the future.", field="expires_at")
        if expires_at > now + timedelta(days=MAX_EXPIRY_DAYS):
            raise BadInput(f"Must be at most {MAX_EXPIRY_DAYS} days ahead.", field="expires_at")
    if creator is not None and creator.expires_at is not None:
        if expires_at is None:
            expires_at = creator.expires_at
        elif expires_at > creator.expires_at:
            raise BadInput("A key cannot outlive the key that creates it.",
                           field="expires_in_days" if expires_in_days is not None else "expires_at")
    with transaction.atomic():  # the account's limit, counted under its row's lock (accounts.limits)
        account = limits.lock_account(user=user)
        limits.check(account=account, what="api_keys", held=active_keys(user=user).count())
        return issue_api_key(user=user, name=name, scopes=scopes, projects=project_ids, expires_at=expires_at)


def active_keys(*, user: User) -> QuerySet[ApiKey]:
    """The user's keys neither revoked nor expired: what ACCOUNT_MAX_API_KEYS counts."""
    return ApiKey.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()), user=user,
                                 revoked_at__isnull=True)


def revoke_api_key(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key
