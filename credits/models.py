from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from accounts.models import User


class CreditAccount(models.Model):
    """The cached balance. Only ledger.py changes it, always with a LedgerEntry, under a row lock."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credit_account")
    balance = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(balance__gte=0), name="balance_never_negative")]

    def __str__(self) -> str:
        return f"{self.user}: {self.balance}"


class UserCredits(User):
    """A user seen from credits: the staff console's list of balances and its grant action (credits/admin.py).
    A proxy: no table of its own, the accounts' user admin stays as accounts has it."""

    class Meta:
        proxy = True
        verbose_name = "user's credits"
        verbose_name_plural = "users' credits"


class LedgerEntry(models.Model):
    """Append-only. The sum of deltas for a user equals their balance."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="ledger_entries")
    delta = models.BigIntegerField()
    balance_after = models.BigIntegerField()
    reason = models.CharField(max_length=64)
    reference_type = models.CharField(max_length=64, blank=True, default="")
    reference_id = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "created_at"]), models.Index(fields=["reference_type", "reference_id"])]
        verbose_name_plural = "ledger entries"

    def __str__(self) -> str:
        return f"{self.user} {self.delta:+d} ({self.reason})"


class IdempotencyKey(models.Model):
    """Reserved before work starts, so a concurrent duplicate sees the row (409) instead of running the work twice.

    An in-progress reservation is owned by one attempt for a lease: once `lease_expires_at` has passed (and no live
    transaction holds the row), a retry of the same request takes it over by bumping `attempt`. Work completes only
    while its attempt still owns the row, so a holder that lost its lease cannot charge a second time. A NULL lease
    is a reservation made before leases existed (or by code that does not know them): it is never taken over.
    """

    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress"
        COMPLETED = "completed"

    key = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    endpoint = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IN_PROGRESS)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.BinaryField(null=True, blank=True)
    response_content_type = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    # The owner of an in-progress reservation: 1 for the first reserver, +1 per takeover. db_default so that an
    # INSERT from code that predates the column (a rolling deploy) still gets a valid owner.
    attempt = models.PositiveIntegerField(default=1, db_default=1)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "user", "endpoint"], name="uniq_idempotency_key")]

    def __str__(self) -> str:
        return f"{self.key} {self.endpoint} ({self.status})"
