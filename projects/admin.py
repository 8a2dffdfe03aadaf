from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages

from projects.models import Membership, Project, ProjectShare
from projects.quotas import report
from projects.sharing import revoke_share_row

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """Projects, members and quotas. search.admin extends it with the ranking settings (reranker, fusion) and the
    deletion of search's content, since those are search's (docs/architecture.md)."""

    list_display = ("slug", "name", "member_count", "created_at")
    list_filter = ("created_at",)
    search_fields = ("slug", "name", "memberships__user__email")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]
    readonly_fields = ("usage",)

    fieldsets = ((None, {"fields": ("slug", "name")}),
                 ("Quotas (empty: the QUOTA_* settings)", {"fields": ("quota_documents", "quota_chunks", "quota_bytes",
                                                                      "usage")}))

    @admin.display(description="members")
    def member_count(self, obj: Project) -> int:
        return obj.memberships.count()

    @admin.display(description="usage / quota")
    def usage(self, obj: Project) -> str:
        if obj.pk is None:
            return "–"
        r = report(obj)
        return ", ".join(f"{name}: {r['usage'][name]:,} / {r['quota'][name]:,}" for name in ("documents", "chunks",
                                                                                              "bytes"))


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("project", "user", "role", "created_at")
    list_filter = ("role",)
    search_fields = ("project__slug", "user__email")
    autocomplete_fields = ("user", "project")


@admin.register(ProjectShare)
class ProjectShareAdmin(admin.ModelAdmin):
    list_display = ("dataset", "project", "granted_by", "granted_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "granted_at")
    search_fields = ("dataset__name", "dataset__project__slug", "project__slug", "granted_by__email")
    autocomplete_fields = ("dataset", "project", "granted_by")
    readonly_fields = ("granted_at",)
    actions = ["revoke_shares"]

    @admin.action(description="Revoke the selected shares")
    def revoke_shares(self, request: HttpRequest, queryset: QuerySet[ProjectShare]) -> None:
        n = 0
        for share in queryset.filter(revoked_at__isnull=True):
            revoke_share_row(share=share)
            n += 1
        self.message_user(request, f"Revoked {n} share(s).", messages.SUCCESS)
