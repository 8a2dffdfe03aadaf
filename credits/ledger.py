"""Credits as a ledger. Every change is a row; the balance moves in the same transaction.

Why a row lock and not an UPDATE ... WHERE balance >= n alone: we also write the
balance_after on the ledger row, and want one code path for grants and debits.
"""
from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Sum
from django.db.models.functions import TruncDay

from config.errors import BadInput, InsufficientCredits
from credits.models import CreditAccount, LedgerEntry

if TYPE_CHECKING:
    from accounts.models import User


def _locked_account(user: User) -> CreditAccount:
    CreditAccount.objects.get_or_create(user=user)
    return CreditAccount.objects.select_for_update().get(user=user)


def get_balance(*, user: User) -> int:
    return CreditAccount.objects.filter(user=user).values_list("balance", flat=True).first() or 0


def require_balance(*, user: User, amount: int = 1) -> None:
    """Pre-check only (run_search's step 2); the debit itself re-checks under the lock."""
    balance = get_balance(user=user)
    if balance < amount:
        raise InsufficientCredits(f"This needs {amount} credit(s); your balance is {balance}.",
                                  extra={"balance": balance, "required": amount})


def deduct(*, user: User, amount: int, reason: str, reference_type: str = "", reference_id: str = "") -> LedgerEntry:
    """Credits are deducted here and only here: the balance is re-checked under the account's row lock, so
    concurrent requests can never overspend, and the ledger entry is written in the same transaction."""
    if amount <= 0:
        raise BadInput("amount must be positive", field="amount")
    with transaction.atomic():
        account = _locked_account(user)
        if account.balance < amount:
            raise InsufficientCredits(f"This needs {amount} credit(s); your balance is {account.balance}.",
                                      extra={"balance": account.balance, "required": amount})
        account.balance -= amount
        account.save(update_fields=["balance", "updated_at"])
        return LedgerEntry.objects.create(user=user, delta=-amount, balance_after=account.balance, reason=reason,
                                          reference_type=reference_type, reference_id=str(reference_id))


def grant(*, user: User, amount: int, reason: str = "grant", reference_type: str = "", reference_id: str = "") -> LedgerEntry:
    if amount <= 0:
        raise BadInput("amount must be positive", field="amount")
    with transaction.atomic():
        account = _locked_account(user)
        account.balance += amount
        account.save(update_fields=["balance", "updated_at"])
        return LedgerEntry.objects.create(user=user, delta=amount, balance_after=account.balance, reason=reason,
                                          reference_type=reference_type, reference_id=str(reference_id))


def ledger_sum(*, user: User) -> int:
    return LedgerEntry.objects.filter(user=user).aggregate(s=Sum("delta"))["s"] or 0


def recent_entries(*, user: User, limit: int = 50) -> list[LedgerEntry]:
    return list(LedgerEntry.objects.filter(user=user).order_by("-created_at", "-id")[:limit])


def spent_per_day(*, since: datetime) -> dict[date, float]:
    """Credits spent per day since `since` (every user): the staff dashboard's money chart."""
    rows = (LedgerEntry.objects.filter(created_at__gte=since, delta__lt=0).annotate(day=TruncDay("created_at"))
            .values("day").annotate(spent=Sum("delta")).order_by())
    return {r["day"].date(): -float(r["spent"]) for r in rows}
