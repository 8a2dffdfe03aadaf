from __future__ import annotations

from django.contrib import admin, messages
from django.utils.html import format_html

from projects.models import Dataset, Membership, Project, ProjectShare
from projects.sharing import revoke_share_row


class DeletesOwnedContent:
    """Deleting a project or dataset deletes what it owns (documents, chunks, ingest jobs, graph edges, logs,
    shares, memberships), and the index deletes are queued by the search_chunk trigger.

    Why the override: those rows have read-only admins (history is never edited by hand), and Django's delete
    confirmation requires delete permission on every cascaded model, so no one could delete a dataset that had
    content. Permission to delete the owner is what is checked; other models keep Django's rule.
    """

    def get_deleted_objects(self, objs, request):  # noqa: ANN001, ANN201
        from django.apps import apps

        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        owned = {str(m._meta.verbose_name) for m in apps.get_app_config("search").get_models()}
        owned |= {str(ProjectShare._meta.verbose_name), str(Membership._meta.verbose_name),
                  str(Dataset._meta.verbose_name)}
        return deleted, counts, {p for p in perms_needed if str(p) not in owned}, protected


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(DeletesOwnedContent, admin.ModelAdmin):
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
        from projects.quotas import report

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


@admin.register(Dataset)
class DatasetAdmin(DeletesOwnedContent, admin.ModelAdmin):
    """Long actions go to Celery (or the embedded store's owner); progress shows under Ingest jobs."""

    list_display = ("name", "project", "kind", "is_global", "created_at")
    list_filter = ("kind", "is_global")
    search_fields = ("name", "project__slug", "description")
    autocomplete_fields = ("project",)
    readonly_fields = ("content_report",)
    actions = ["reingest", "recompute_embeddings", "reindex"]

    @admin.display(description="content")
    def content_report(self, obj: Dataset) -> str:
        from search.maintenance import dataset_report

        if obj.pk is None:
            return "-"
        r = dataset_report(dataset=obj)
        job = r["last_job"]
        coverage = ", ".join(f"{m}: {pct}%" for m, pct in r["coverage"].items()) or "no vectors yet"
        last = (f"{job.created_at:%Y-%m-%d %H:%M} {job.status} ({job.files_done}/{job.files_total} files, "
                f"{job.chunks_written} chunks)" if job else "never")
        return format_html("<b>{}</b> documents, <b>{}</b> chunks<br>embedding coverage: {}<br>last ingest: {}"
                           "<br>errors: {}", r["documents"], r["chunks"], coverage, last,
                           (job.error if job and job.error else "none"))

    @admin.action(description="Ingest again (last source; unchanged files are skipped)")
    def reingest(self, request, queryset):  # noqa: ANN001, ANN201
        from search.maintenance import reingest

        for ds in queryset:
            try:
                reingest(dataset=ds, user=request.user)
                self.message_user(request, f"{ds.name}: ingest queued (see Ingest jobs for progress).")
            except ValueError as exc:
                self.message_user(request, str(exc), messages.WARNING)

    @admin.action(description="Recompute embeddings for the configured model")
    def recompute_embeddings(self, request, queryset):  # noqa: ANN001, ANN201
        from search.tasks import reembed_dataset

        for ds in queryset:
            reembed_dataset.delay(ds.pk, True)
        self.message_user(request, f"Re-embedding queued for {queryset.count()} dataset(s).")

    @admin.action(description="Reindex Qdrant from Postgres (no re-embedding)")
    def reindex(self, request, queryset):  # noqa: ANN001, ANN201
        from search.maintenance import reindex

        self.message_user(request, f"Reindex: {reindex()}.")


@admin.register(ProjectShare)
class ProjectShareAdmin(admin.ModelAdmin):
    list_display = ("dataset", "project", "granted_by", "granted_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "granted_at")
    search_fields = ("dataset__name", "dataset__project__slug", "project__slug", "granted_by__email")
    autocomplete_fields = ("dataset", "project", "granted_by")
    readonly_fields = ("granted_at",)
    actions = ["revoke_shares"]

    @admin.action(description="Revoke the selected shares")
    def revoke_shares(self, request, queryset):  # noqa: ANN001, ANN201
        n = 0
        for share in queryset.filter(revoked_at__isnull=True):
            revoke_share_row(share=share)
            n += 1
        self.message_user(request, f"Revoked {n} share(s).", messages.SUCCESS)
