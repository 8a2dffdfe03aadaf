from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages

from projects.models import Membership, Project, ProjectShare
from projects.sharing import revoke_share_row
from search.admin import DeletesOwnedContent  # deleting a project deletes its search content

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


class ProjectForm(forms.ModelForm):
    """The reranker is picked from the models trained here, each labelled with its held-out evidence."""

    class Meta:
        model = Project
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from search.engine.reranker_store import trained_rerankers

        choices = [("", "none (RERANKER_MODEL, else the embedded reranker on request)")]
        for m in trained_rerankers():
            h = m.get("heldout") or {}
            choices.append((m["name"], f"{m['name']} — held-out nDCG@10 {h.get('reranked_ndcg@10')} vs fused "
                                       f"{h.get('fused_ndcg@10')}"))
        current = self.instance.reranker if self.instance and self.instance.pk else ""
        if current and current not in {c[0] for c in choices}:
            choices.append((current, f"{current} (missing on this machine)"))
        self.fields["reranker"] = forms.ChoiceField(choices=choices, required=False,
                                                    help_text=Project._meta.get_field("reranker").help_text)


@admin.register(Project)
class ProjectAdmin(DeletesOwnedContent, admin.ModelAdmin):
    form = ProjectForm
    list_display = ("slug", "name", "member_count", "reranker", "fusion_label", "created_at")
    list_filter = ("created_at",)
    search_fields = ("slug", "name", "memberships__user__email")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]
    readonly_fields = ("usage", "fusion_choice")
    actions = ["choose_fusion"]

    @admin.action(description="Choose fusion from feedback (adopted only on held-out evidence)")
    def choose_fusion(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        """Runs here, in the web process, because it owns the embedded index handle (a command in another
        process cannot open it while the server runs); a few seconds per hundred judged queries."""
        from config.errors import DependencyDown
        from search.quality.fusion_choice import choose_for_project

        for project in queryset:
            try:
                result = choose_for_project(project=project)
            except DependencyDown as exc:
                self.message_user(request, f"{project.slug}: {exc.detail}", messages.WARNING)
                continue
            verdict = f"adopted {result.setting.label}" if result.adopted else f"kept the default ({result.evidence.get('baseline', 'rrf k=60')})"
            self.message_user(request, f"{project.slug}: {verdict}: {result.reason}",
                              messages.SUCCESS if result.adopted else messages.INFO)
    fieldsets = ((None, {"fields": ("slug", "name")}),
                 ("Ranking", {"fields": ("reranker", "fusion_choice")}),
                 ("Quotas (empty: the QUOTA_* settings)", {"fields": ("quota_documents", "quota_chunks", "quota_bytes",
                                                                      "usage")}))

    @admin.display(description="fusion")
    def fusion_label(self, obj: Project) -> str:
        choice = obj.fusion or {}
        if choice.get("setting"):
            return choice.get("label", "")
        return f"default ({choice.get('evidence', {}).get('baseline', 'for its content kind')})"

    @admin.display(description="fusion, from feedback")
    def fusion_choice(self, obj: Project) -> str:
        """What `manage.py choose_fusion` decided and on what evidence (issue 15 §2)."""
        from django.utils.html import format_html, format_html_join

        choice = obj.fusion or {}
        if not choice:
            return "not evaluated yet: manage.py choose_fusion --project <slug> (needs judged queries)"
        ev = choice.get("evidence", {})
        running = choice.get("label") if choice.get("setting") else f"the default, {ev.get('baseline', '')}"
        rows = [("runs", running), ("why", choice.get("reason", "")),
                ("judged queries", f"{ev.get('judged_queries', 0)} (at least {ev.get('min_queries', '?')})")]
        if "legs" in ev:
            rows.append(("single legs, nDCG@10", f"dense {ev['legs']['dense']}, sparse {ev['legs']['sparse']}"))
        if "pick" in ev:
            rows.append((f"pick half ({ev['pick']['queries']} q), best", ev["pick"]["best"]))
        if "confirm" in ev:
            c = ev["confirm"]
            rows.append((f"confirm half ({c['queries']} q)", f"default {c['default']} → best {c['best']} "
                         f"(gain {c['gain']:+}, 95 % lower bound {c['gain_lower_95']:+}; {c['wins']} wins, "
                         f"{c['losses']} losses)"))
        rows.append(("computed", ev.get("computed_at", "")))
        return format_html("<table>{}</table>", format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows))

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
