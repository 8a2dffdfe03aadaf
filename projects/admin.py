from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages

from config.errors import ApiError
from projects.deletion import deleting
from projects.models import Membership, Project
from projects.quotas import report

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from django.contrib.admin.options import InlineModelAdmin
    from django.db.models import Model, QuerySet
    from django.http import HttpRequest

# What other apps add to the project admin without replacing it (each registers from its AppConfig.ready):
# inlines (search: the ranking settings), actions (search: choose fusion), and the models a project's delete
# takes with it whose own delete permission is not asked for (search: datasets, documents, chunks...).
_INLINES: list[type[InlineModelAdmin]] = []
_ACTIONS: list[Callable[..., None]] = []
_OWNED: set[type[Model]] = {Membership}


def extend_project_admin(*, inlines: Sequence[type[InlineModelAdmin]] = (),
                         actions: Sequence[Callable[..., None]] = (),
                         owned: Sequence[type[Model]] = ()) -> None:
    """Add inlines, actions and owned models to the project admin (idempotent)."""
    _INLINES.extend(i for i in inlines if i not in _INLINES)
    _ACTIONS.extend(a for a in actions if a not in _ACTIONS)
    _OWNED.update(owned)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """Projects, members and quotas; other apps add their inlines and actions (extend_project_admin).

    Deleting a project deletes what it owns (memberships, and what the apps registered: datasets, documents, chunks,
    ingest jobs, logs, shares), with the index deletes queued by the search_chunk trigger. Why the permission
    override: those rows have read-only admins (history is never edited by hand), and Django's confirmation asks
    delete permission on every cascaded model, so no one could delete a project that had content. Permission to
    delete the project is what is checked; other models keep Django's rule. The delete goes through the same guard
    as the API (projects.deletion): the datasets' jobs are asked to stop and waited for, else nothing is deleted and
    the page says why, instead of a foreign-key 500."""

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


    def get_inlines(self, request: HttpRequest, obj: Project | None) -> list[type[InlineModelAdmin]]:
        return [*super().get_inlines(request, obj), *_INLINES]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        for action in _ACTIONS:
            name = action.__name__
            actions[name] = (action, name, getattr(action, "short_description", name.replace("_", " ")))
        return actions

    def get_deleted_objects(self, objs: Sequence[Model] | QuerySet[Model],
                            request: HttpRequest) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        owned = {str(m._meta.verbose_name) for m in _OWNED}
        return deleted, counts, {p for p in perms_needed if str(p) not in owned}, protected

    def delete_model(self, request: HttpRequest, obj: Project) -> None:
        self._delete_guarded(request, [obj.pk], lambda: super(ProjectAdmin, self).delete_model(request, obj))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        self._delete_guarded(request, list(queryset.values_list("pk", flat=True)),
                             lambda: super(ProjectAdmin, self).delete_queryset(request, queryset))

    def message_user(self, request: HttpRequest, message: str, level: int = messages.INFO, *args: Any,
                     **kwargs: Any) -> None:
        if level == messages.SUCCESS and getattr(request, "_deletion_refused", False):
            return  # Django's "deleted successfully" after a refused delete would be false
        super().message_user(request, message, level, *args, **kwargs)

    def _delete_guarded(self, request: HttpRequest, project_ids: list[int], delete: Callable[[], None]) -> None:
        try:
            with deleting(project_ids=project_ids):
                delete()
        except ApiError as exc:
            request._deletion_refused = True  # type: ignore[attr-defined]
            self.message_user(request, f"Nothing was deleted: {exc.detail}", messages.ERROR)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("project", "user", "role", "created_at")
    list_filter = ("role",)
    search_fields = ("project__slug", "user__email")
    autocomplete_fields = ("user", "project")
