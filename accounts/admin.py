"""Staff console for users and API keys, with the key-revoke action (credits: credits/admin.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm

from accounts.apikeys import project_slugs, revoke_api_key
from accounts.login_limits import LimitedAdminAuthenticationForm
from accounts.models import SCOPE_HELP, SCOPES, ApiKey, User

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest


class EmailUserCreationForm(AdminUserCreationForm):
    class Meta:
        model = User
        fields = ("email",)


class EmailUserChangeForm(UserChangeForm):
    class Meta:
        model = User
        fields = "__all__"


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = ("name", "prefix", "scopes", "expires_at", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False  # keys are issued by the API or `manage.py create_api_key`, so the secret can be shown


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    form = EmailUserChangeForm
    add_form = EmailUserCreationForm
    ordering = ("email",)
    list_display = ("email", "name", "is_staff", "is_active", "date_joined", "last_login")
    list_filter = ("is_staff", "is_superuser", "is_active")
    search_fields = ("email", "name")
    readonly_fields = ("date_joined", "last_login")
    fieldsets = (
        (None, {"fields": ("email", "password", "name")}),
        ("Account limits (blank: the ACCOUNT_MAX_* setting)", {"fields": ("max_projects", "max_datasets",
                                                                          "max_api_keys")}),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)
    inlines = [ApiKeyInline]


class ApiKeyForm(forms.ModelForm):
    """Staff may narrow a key's scopes or change its expiry; the project limit is shown, not edited here."""

    scopes = forms.MultipleChoiceField(choices=[(s, f"{s}: {SCOPE_HELP[s]}") for s in SCOPES],
                                       widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = ApiKey
        fields = ("name", "scopes", "expires_at")

    def clean_scopes(self) -> list[str]:
        chosen = set(self.cleaned_data["scopes"])
        return [s for s in SCOPES if s in chosen]


class ScopeListFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(s, s) for s in SCOPES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> QuerySet[ApiKey]:
        return queryset.filter(scopes__contains=[self.value()]) if self.value() in SCOPES else queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = ("prefix", "name", "user", "scope_list", "project_limit", "expires_at", "last_used_at",
                    "created_at", "status")
    list_filter = (ScopeListFilter, ("revoked_at", admin.EmptyFieldListFilter),
                   ("expires_at", admin.EmptyFieldListFilter), "created_at")
    search_fields = ("prefix", "name", "user__email")
    readonly_fields = ("user", "prefix", "key_hash", "project_limit", "created_at", "last_used_at", "revoked_at",
                       "status")
    fields = ("user", "name", "prefix", "key_hash", "status", "scopes", "project_limit", "expires_at", "created_at",
              "last_used_at", "revoked_at")
    actions = ["revoke_keys"]

    @admin.display(description="scopes")
    def scope_list(self, obj: ApiKey) -> str:
        return ", ".join(obj.scopes or [])

    @admin.display(description="projects")
    def project_limit(self, obj: ApiKey) -> str:
        slugs = project_slugs(obj)
        if slugs is None:
            return "all (no limit)"
        return ", ".join(slugs) or "none left (its projects were deleted)"

    @admin.display(description="status")
    def status(self, obj: ApiKey) -> str:
        return "revoked" if obj.revoked_at else ("expired" if obj.is_expired else "active")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke the selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        n = 0
        for key in queryset.filter(revoked_at__isnull=True):
            revoke_api_key(api_key=key)
            n += 1
        self.message_user(request, f"Revoked {n} key(s).", messages.SUCCESS)


# /admin/login/ limits failed logins like the site's login (accounts/login_limits.py) and says so when it refuses.
admin.site.login_form = LimitedAdminAuthenticationForm
