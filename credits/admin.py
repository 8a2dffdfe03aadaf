"""The ledger is read-only here: credits change only through ledger.grant/deduct (the grant action on users'
credits)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from config.adminkit import ReadOnlyAdmin
from credits.ledger import get_balance, grant
from credits.models import CreditAccount, IdempotencyKey, LedgerEntry, UserCredits

if TYPE_CHECKING:
    from django.db.models import Model, QuerySet
    from django.http import HttpRequest


class GrantCreditsForm(forms.Form):
    amount = forms.IntegerField(min_value=1, max_value=1_000_000)
    reason = forms.CharField(max_length=64, initial="admin grant")


@admin.register(UserCredits)
class UserCreditsAdmin(ReadOnlyAdmin):
    """Every user with their balance (one with no ledger row yet has 0), and the grant action."""

    list_display = ("email", "name", "is_active", "credit_balance", "date_joined")
    list_filter = ("is_staff", "is_active")
    search_fields = ("email", "name")
    ordering = ("email",)
    fields = ("email", "name", "credit_balance")
    readonly_fields = fields
    actions = ["grant_credits"]

    @admin.display(description="credits")
    def credit_balance(self, obj: UserCredits) -> int:
        return get_balance(user=obj)

    @admin.action(description="Grant credits to the selected users…")
    def grant_credits(self, request: HttpRequest, queryset: QuerySet[UserCredits]) -> TemplateResponse | None:
        """Intermediate page: the amount is asked for, then one ledger row per user."""
        form = GrantCreditsForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            amount, reason = form.cleaned_data["amount"], form.cleaned_data["reason"]
            for user in queryset:
                grant(user=user, amount=amount, reason=reason, reference_type="admin",
                      reference_id=str(request.user.pk))
            self.message_user(request, f"Granted {amount} credit(s) to {queryset.count()} user(s).",
                              messages.SUCCESS)
            return None
        context = {**self.admin_site.each_context(request), "title": "Grant credits", "form": form,
                   "users": queryset, "opts": self.model._meta,
                   "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME}
        return TemplateResponse(request, "admin/credits/grant_credits.html", context)


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
