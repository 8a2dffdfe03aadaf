"""API keys: create (secret shown once), verify, revoke."""
from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.utils import timezone

from accounts.models import ApiKey, User

KEY_PREFIX = "sk_"


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    secret: str  # the only time the full secret exists outside the caller


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_api_key(*, user: User, name: str = "default") -> IssuedKey:
    prefix = secrets.token_hex(6)
    secret = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(user=user, name=name, prefix=prefix, key_hash=_hash(secret))
    return IssuedKey(api_key=key, secret=secret)


def verify_api_key(*, secret: str) -> ApiKey | None:
    """Return the active key for this secret, stamping last_used_at; None if wrong or revoked."""
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
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def revoke_api_key(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key
