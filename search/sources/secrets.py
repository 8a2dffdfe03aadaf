"""Source credentials at rest: a per-source token, encrypted with Fernet (AES-128-CBC + HMAC-SHA256).

Why not a plain column: a database dump or an admin screen must not hand out a team's repository token. The
key is derived from SOURCES_SECRET_KEY (default SECRET_KEY); rotating it makes stored tokens unreadable, and a
sync then fails with a message that asks for the token again rather than with a traceback.
"""
from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

if TYPE_CHECKING:
    from search.models import Source


class SecretUnreadable(RuntimeError):
    """The stored token was encrypted with another key (SOURCES_SECRET_KEY changed)."""


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"search.sources.secrets:" + settings.SOURCES_SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(token: str) -> bytes:
    """b"" for no token (the column's empty value)."""
    return _fernet().encrypt(token.encode()) if token else b""


def decrypt(blob: bytes | memoryview | None) -> str:
    if not blob:
        return ""
    try:
        return _fernet().decrypt(bytes(blob)).decode()
    except InvalidToken:
        raise SecretUnreadable("the source's stored token cannot be decrypted (was SOURCES_SECRET_KEY changed?); "
                               "set the token again") from None


def source_token(source: Source) -> str:
    """The decrypted token for the fetcher; never for a response or a log line."""
    return decrypt(source.secret)
