"""Per-account limits: how many projects, datasets and API keys one account may hold.

Why: quotas are per project, so without a limit per account one sign-up could create projects, datasets and
keys in a loop, each project with its own full quota. A create checks the count with the account's row locked
(SELECT ... FOR UPDATE), so concurrent creates by one account take turns and cannot pass the limit together.
The limits are settings (ACCOUNT_MAX_PROJECTS, ACCOUNT_MAX_DATASETS, ACCOUNT_MAX_API_KEYS); staff raise or lower
them for one account in the user admin (User.max_projects, max_datasets, max_api_keys; blank: the setting).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from django.conf import settings
from django.db import transaction

from accounts.models import User
from config.errors import Conflict

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

Limited = Literal["projects", "datasets", "api_keys"]
_SETTING = {"projects": "ACCOUNT_MAX_PROJECTS", "datasets": "ACCOUNT_MAX_DATASETS",
            "api_keys": "ACCOUNT_MAX_API_KEYS"}
_WORDS = {"projects": "projects", "datasets": "datasets", "api_keys": "active API keys"}


class AccountLimitReached(Conflict):
    code = "account_limit"


def limit_of(*, account: User, what: Limited) -> int:
    """The account's own override, else the setting."""
    own = getattr(account, f"max_{what}")
    return int(own if own is not None else getattr(settings, _SETTING[what]))


def lock_account(*, user: User | AnonymousUser) -> User:
    """The account's row, locked until the surrounding transaction ends (creates of one account take turns)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("lock_account needs a transaction: the lock must cover the create it guards")
    return User.objects.select_for_update().get(pk=user.pk)


def check(*, account: User, what: Limited, held: int) -> None:
    """409 account_limit (field: the kind, with `limit` and `held`) when the account already holds its limit.

    `account` is the row lock_account returned, `held` counted after taking the lock."""
    limit = limit_of(account=account, what=what)
    if held >= limit:
        raise AccountLimitReached(f"This account already has {held} {_WORDS[what]}; its limit is {limit}. Delete "
                                  "one first, or ask an administrator to raise the limit.", field=what,
                                  extra={"limit": limit, "held": held})
