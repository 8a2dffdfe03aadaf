from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from accounts.scopes import SCOPE_HELP, SCOPES  # noqa: F401 - what an API key may do (re-exported)


class UserManager(BaseUserManager):
    use_in_migrations = True

    def _create(self, email: str, password: str | None, **extra: Any) -> User:
        if not email:
            raise ValueError("email is required")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create(email, password, **extra)

    def create_superuser(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        return self._create(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """Email is the login. Credits hang off the user (credits.CreditAccount)."""

    email = models.EmailField(unique=True)
    name = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)
    date_joined = models.DateTimeField(default=timezone.now)
    # per-account limit overrides (null: the ACCOUNT_MAX_* setting); see accounts/limits.py
    max_projects = models.PositiveIntegerField(null=True, blank=True,
                                               help_text="Projects this account may create (blank: "
                                                         "ACCOUNT_MAX_PROJECTS).")
    max_datasets = models.PositiveIntegerField(null=True, blank=True,
                                               help_text="Datasets this account may create (blank: "
                                                         "ACCOUNT_MAX_DATASETS).")
    max_api_keys = models.PositiveIntegerField(null=True, blank=True,
                                               help_text="Active API keys this account may hold (blank: "
                                                         "ACCOUNT_MAX_API_KEYS).")

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    class Meta:
        ordering = ["email"]

    def __str__(self) -> str:
        return self.email


def all_scopes() -> list[str]:
    """Default for new rows and for keys issued before scopes existed: every scope."""
    return list(SCOPES)


class ApiKey(models.Model):
    """A bearer secret. Only a SHA-256 of it is stored; the prefix finds the row.

    A key carries scopes (default: all), an optional project limit (`project_ids`; null = every project the
    user is a member of, a list = only these, ids of deleted projects simply match nothing) and an optional
    expiry. Keys issued before these fields existed got every scope, no limit and no expiry.
    """

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, default="default")
    prefix = models.CharField(max_length=16, unique=True, db_index=True)
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scopes = ArrayField(models.CharField(max_length=16), default=all_scopes)
    project_ids = ArrayField(models.BigIntegerField(), null=True, blank=True,
                             help_text="Null: every project of the user. A list: only these projects.")
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    def has_scope(self, scope: str) -> bool:
        return scope in (self.scopes or ())


class PendingSignup(models.Model):
    """A sign-up waiting for its owner to open the emailed link (accounts/signup.py).

    Why a row and not the account: the answer to a sign-up must not tell whether the address has an account, so
    nothing about the account can change until the address's owner confirms. Only a SHA-256 of the link's token
    is stored, beside the password's hash (never the password); rows expire after SIGNUP_CONFIRM_MAX_AGE_S and are
    removed by the next sign-up."""

    email = models.EmailField(db_index=True)
    name = models.CharField(max_length=200, blank=True)
    password_hash = models.CharField(max_length=256)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"pending sign-up {self.email}"
