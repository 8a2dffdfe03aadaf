"""The ledger is read-only here: credits change only through ledger.grant/deduct (the user action)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin

from config.adminkit import ReadOnlyAdmin
from credits.models import CreditAccount, IdempotencyKey, LedgerEntry

if TYPE_CHECKING:
    from django.db.models import Model
    from django.http import HttpRequest


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "user", "delta", "balance_after", "reason", "reference_type", "reference_id")
    list_filter = ("reason", "reference_type", "created_at")
    search_fields = ("user__email", "reason", "reference_id")
    date_hierarchy = "created_at"


@admin.register(CreditAccount)
class CreditAccountAdmin(ReadOnlyAdmin):
    list_display = ("user", "balance", "updated_at")
    list_filter = ("updated_at",)
    search_fields = ("user__email",)


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(ReadOnlyAdmin):
    list_display = ("key", "user", "endpoint", "status", "response_status", "created_at", "expires_at")
    list_filter = ("status", "endpoint")
    search_fields = ("key", "user__email", "endpoint")
    exclude = ("response_body",)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return True  # staff may clear a stuck reservation
