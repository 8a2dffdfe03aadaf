"""Free credits for a new self-serve account: granted when accounts confirms one (accounts.signals), in the
transaction that creates it, so an account never exists without them nor they without it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings

from credits.ledger import grant

if TYPE_CHECKING:
    from accounts.models import User


def grant_signup_credits(*, user: User, **_: Any) -> None:
    """Receiver of accounts.signals.account_confirmed: SIGNUP_FREE_CREDITS (0: none) through the ledger."""
    amount = int(settings.SIGNUP_FREE_CREDITS or 0)
    if amount > 0:
        grant(user=user, amount=amount, reason="signup")
