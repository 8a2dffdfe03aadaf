"""Staff console for the retrieval engine: content, jobs with live progress, logs (read-only), graph, configs."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from django import forms
from django.apps import apps
from django.contrib import admin, messages
from django.db import transaction
from django.http import FileResponse, Http404, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from config.adminkit import ReadOnlyAdmin
from config.errors import ApiError, DependencyDown
from inference.encoders import describe_devices
from projects.admin import extend_project_admin
from projects.deletion import deleting
from projects.models import Project
from search.engine.reconcile import reconcile_all
from search.engine.reranker_store import trained_rerankers
from search.ingest import maintenance
from search.ingest.cancel import cancel_job
from search.ingest.locks import runner_alive
from search.ingest.progress import describe_pace, ingest_job_pace, pace_unit
from search.ingest.reembedding import start_reembed
from search.ingest.sharing import revoke_share_row
from search.models import (
    Chunk,
    CommitMemory,
    DailyMetric,
    Dataset,
    Document,
    EvaluationRun,
    Feedback,
    GraphEdge,
    IndexOutbox,
    IndexWatermark,
    IngestJob,
    ProjectRanking,
    ProjectShare,
    QualityJob,
    QuerySession,
    ReconcileRun,
    RerankResult,
    Source,
    TraversalConfig,
)
from search.quality import jobs as quality_jobs
from search.quality.evaluation import report_slug
from search.quality.fusion_choice import choose_for_project
from search.quality.progress import quality_job_pace
from search.rules import traversal
from search.sources import spec, sync
from search.sources.registry import SOURCE_TYPES
from search.sources.spec import display_url
from search.sources.sync import set_source, start_sync, sync_history

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from django.db.models import Model, QuerySet
    from django.http import HttpRequest
    from django.urls import URLPattern, URLResolver


class DeletesOwnedContent:
    """Deleting a dataset deletes what it owns (documents, chunks, ingest jobs, graph edges, shares), and the index
    deletes are queued by the search_chunk trigger (a project's delete: projects.admin.ProjectAdmin).

    Why the override: those rows have read-only admins (history is never edited by hand), and Django's delete
    confirmation requires delete permission on every cascaded model, so no one could delete a dataset that had
    content. Permission to delete the owner is what is checked; other models keep Django's rule.
    """

    def get_deleted_objects(self, objs: Sequence[Model] | QuerySet[Model],
                            request: HttpRequest) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        owned = {str(m._meta.verbose_name) for m in apps.get_app_config("search").get_models()}
        return deleted, counts, {p for p in perms_needed if str(p) not in owned}, protected

    # Deleting from the admin goes through the same guard as the API (projects.deletion): the datasets' jobs are
    # asked to stop and waited for, else nothing is deleted and the page says why, instead of a foreign-key 500.
    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        self._delete_guarded(request, [obj], lambda: super(DeletesOwnedContent, self).delete_model(request, obj))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Model]) -> None:
        self._delete_guarded(request, list(queryset),
                             lambda: super(DeletesOwnedContent, self).delete_queryset(request, queryset))

    def message_user(self, request: HttpRequest, message: str, level: int = messages.INFO, *args: Any,
                     **kwargs: Any) -> None:
        if level == messages.SUCCESS and getattr(request, "_deletion_refused", False):
            return  # Django's "deleted successfully" after a refused delete would be false
        super().message_user(request, message, level, *args, **kwargs)  # type: ignore[misc]

    def _delete_guarded(self, request: HttpRequest, objs: list[Model], delete: Callable[[], None]) -> None:
        try:
            with deleting(dataset_ids=[obj.pk for obj in objs]):
                delete()
        except ApiError as exc:
            request._deletion_refused = True  # type: ignore[attr-defined]
            self.message_user(request, f"Nothing was deleted: {exc.detail}", messages.ERROR)


@admin.register(Dataset)
class DatasetAdmin(DeletesOwnedContent, admin.ModelAdmin):
    """Long actions go to Celery (or the embedded store's owner); progress shows under Ingest jobs.

    Its panel and actions are search's upkeep of the dataset's content (search.ingest.maintenance)."""

    list_display = ("name", "project", "kind", "is_global", "dense_model", "created_at")
    list_filter = ("kind", "is_global")
    search_fields = ("name", "project__slug", "description")
    autocomplete_fields = ("project",)
    # the model changes only through the adoption rule or `manage.py switch_embeddings` (re-embed, then switch)
    readonly_fields = ("content_report", "embedding_model", "embedding_model_next", "embedding_report")
    exclude = ("embedding_evidence",)

    @admin.display(description="dense model")
    def dense_model(self, obj: Dataset) -> str:
        name = obj.embedding_model or "configured"
        return f"{name} → {obj.embedding_model_next}" if obj.embedding_model_next else name

    @admin.display(description="embedding model evidence")
    def embedding_report(self, obj: Dataset) -> str:
        """Why the dataset searches with its model (or why an adaptation was not adopted): the rule's reason, the
        held-out pairs, the judged queries and the cost, as the adoption stored them."""
        ev = obj.embedding_evidence or {}
        if not ev:
            return "no adaptation decided yet"
        held, judged, cost = ev.get("heldout") or {}, ev.get("judged") or {}, ev.get("cost") or {}
        return format_html(
            "<b>{}</b> {}: {}<br>training pairs: {}<br>{}held-out pairs MRR@10 {} → {} (code pairs' 95 % lower bound "
            "{}, without the name pairs {})<br>judged queries: {}<br>cost: {} s adapting, {} s re-embedding{}",
            ev.get("model", "?"), "adopted" if ev.get("adopted") else "not adopted", ev.get("reason", ""),
            ", ".join(f"{kind} {n}" for kind, n in (ev.get("train_pairs") or {}).items()) or "-",
            self._history(ev.get("history")),
            held.get("base_mrr@10", "-"), held.get("adapted_mrr@10", "-"), held.get("code_gain_lower_95", "-"),
            held.get("non_name_gain_lower_95", "-"),
            (f"{judged.get('queries')} queries, nDCG@10 {judged.get('base_ndcg@10')} → {judged.get('adapted_ndcg@10')}"
             f" (95 % lower bound {judged.get('gain_lower_95')})") if judged else "none",
            cost.get("total_seconds", "-"), (ev.get("reembed") or {}).get("seconds", "-"), self._last_rejected(ev))

    @staticmethod
    def _history(history: dict | None) -> str:
        """The time split of the git history (search.quality.history_training): its commits, recall before and
        after on the newest ones with their 95 % intervals, or why history did not decide."""
        if not history:
            return ""
        if not history.get("used"):
            return format_html("git history: not used ({})<br>", history.get("why", ""))
        levels = []
        for label in ("function", "file"):
            lv = history.get(f"{label}_recall@{history.get('k', 10)}") or {}
            low, high = (lv.get("interval_95") or ["-", "-"])[:2]
            levels.append(format_html("{} recall@{} {} → {} (gain {}, 95 % interval {} to {})", label,
                                      history.get("k", 10), lv.get("base", "-"), lv.get("adapted", "-"),
                                      lv.get("gain", "-"), low, high))
        check = history.get("check_commits") or []
        return format_html("git history: {} commits trained ({} changed functions); the newest {} checked ({} … {}): "
                           "{}; {}<br>", history.get("train_commits", "-"), history.get("train_functions", "-"),
                           len(check), check[0][:10] if check else "-", check[-1][:10] if check else "-", *levels)

    @staticmethod
    def _last_rejected(ev: dict) -> str:
        """A later adaptation that was not adopted, shown under the evidence of the model that still serves."""
        rejected = ev.get("last_rejected") or {}
        if not rejected:
            return ""
        return format_html("<br>since then: <b>{}</b> not adopted ({}): {}", rejected.get("model", "?"),
                           (rejected.get("decided_at") or "")[:16], rejected.get("reason", ""))
    actions = ["reingest", "recompute_embeddings", "reindex"]

    @admin.display(description="content")
    def content_report(self, obj: Dataset) -> str:
        if obj.pk is None:
            return "-"
        r = maintenance.dataset_report(dataset=obj)
        job = r["last_job"]
        coverage = ", ".join(f"{m}: {pct}%" for m, pct in r["coverage"].items()) or "no vectors yet"
        last = (f"{job.created_at:%Y-%m-%d %H:%M} {job.status} ({job.files_done}/{job.files_total} files, "
                f"{job.chunks_written} chunks)" if job else "never")
        return format_html("<b>{}</b> documents, <b>{}</b> chunks<br>embedding coverage: {}<br>last ingest: {}"
                           "<br>errors: {}", r["documents"], r["chunks"], coverage, last,
                           (job.error if job and job.error else "none"))

    @admin.action(description="Ingest again (last source; unchanged files are skipped)")
    def reingest(self, request: HttpRequest, queryset: QuerySet[Dataset]) -> None:
        for ds in queryset:
            try:
                sync.reingest(dataset=ds, user=request.user)
                self.message_user(request, f"{ds.name}: ingest queued (see Ingest jobs for progress).")
            except ValueError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            except ApiError as exc:  # a followed dataset whose sync is already queued or running
                self.message_user(request, f"{ds.name}: {exc.detail}", messages.WARNING)

    @admin.action(description="Recompute embeddings for the configured model")
    def recompute_embeddings(self, request: HttpRequest, queryset: QuerySet[Dataset]) -> None:
        for ds in queryset:
            start_reembed(dataset=ds, force=True, user=request.user)
        self.message_user(request, f"Re-embedding queued for {queryset.count()} dataset(s) "
                                   "(see Ingest jobs for progress).")

    @admin.action(description="Reindex Qdrant from Postgres (no re-embedding)")
    def reindex(self, request: HttpRequest, queryset: QuerySet[Dataset]) -> None:
        self.message_user(request, f"Reindex: {maintenance.reindex()}.")


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


@admin.register(Document)
class DocumentAdmin(ReadOnlyAdmin):
    list_display = ("path", "dataset", "repo", "lang", "content_hash", "updated_at")
    list_filter = ("lang", "dataset")
    search_fields = ("path", "repo", "title", "url")
    list_select_related = ("dataset",)


@admin.register(Chunk)
class ChunkAdmin(ReadOnlyAdmin):
    list_display = ("span", "symbol", "kind", "content_kind", "dataset", "book_id")
    list_filter = ("kind", "lang", "content_kind", "is_rule_bearing", "ruleset_id", "book_id")
    search_fields = ("path", "symbol", "text", "micro_summary")
    list_select_related = ("dataset",)

    @admin.display(description="file:lines")
    def span(self, obj: Chunk) -> str:
        return f"{obj.path}:{obj.start_line}-{obj.end_line}"


@admin.register(CommitMemory)
class CommitMemoryAdmin(ReadOnlyAdmin):
    """The past commits `locate` lets vote (search.engine.history_vote), as the syncs remembered them."""

    list_display = ("short_sha", "subject", "dataset", "changed", "definitions", "committed_at", "model_id")
    list_filter = ("dataset",)
    search_fields = ("sha", "subject", "query", "dataset__name", "dataset__project__slug")
    list_select_related = ("dataset",)
    exclude = ("embedding",)
    ordering = ("-pk",)

    @admin.display(description="commit")
    def short_sha(self, obj: CommitMemory) -> str:
        return obj.sha[:12]

    @admin.display(description="files changed")
    def changed(self, obj: CommitMemory) -> str:
        return ", ".join(obj.files)

    @admin.display(description="functions changed")
    def definitions(self, obj: CommitMemory) -> str:
        """The qualified names, or why there are none yet (the next sync names them)."""
        if obj.functions is None:
            return "not read yet"
        return ", ".join(qualname for _, qualname in obj.functions) or "none"


@admin.register(IndexOutbox)
class IndexOutboxAdmin(ReadOnlyAdmin):
    list_display = ("id", "op", "chunk_id", "model_id", "created_at")
    list_filter = ("op", "model_id")
    search_fields = ("chunk_id",)


@admin.register(IndexWatermark)
class IndexWatermarkAdmin(ReadOnlyAdmin):
    list_display = ("store", "last_outbox_id", "updated_at")


def encoders_line() -> str:
    """Where the encoders run, for the job pages' header: a job's pace depends on it (inference.devices)."""
    d = describe_devices()
    if "error" in d:
        return f"Encoders: {d['error']}"
    return (f"Encoders: batches on {d['device']} {d['precision']} (batch {d['batch_size']}); queries on "
            f"{d['query_device']} {d['query_precision']}.")


@admin.register(IngestJob)
class IngestJobAdmin(ReadOnlyAdmin):
    """Progress refreshes while a job runs (the change list reloads itself every 3 s when one is active)."""

    list_display = ("created_at", "dataset", "kind", "status", "progress", "pace", "files_done", "files_total",
                    "files_skipped", "files_deleted", "chunks_written", "embeddings_computed", "embeddings_cached",
                    "short_error")
    list_filter = ("status", "kind")
    search_fields = ("source", "dataset__name", "error")
    readonly_fields = ("pace",)
    change_list_template = "admin/search/ingestjob/change_list.html"
    list_select_related = ("dataset",)
    actions = ["cancel_jobs"]

    @admin.action(description="Cancel (a queued job at once; a running one at its next file, page or document)")
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[IngestJob]) -> None:
        for job in queryset:
            try:
                job = cancel_job(user=request.user, job_id=job.pk)
            except ApiError as exc:  # already ended
                self.message_user(request, f"{job.dataset} {job.pk}: {exc.detail}", messages.WARNING)
                continue
            state = "cancelled" if job.status == IngestJob.Status.CANCELLED else "asked to stop"
            self.message_user(request, f"{job.dataset} {job.pk}: {state}.")

    @admin.display(description="progress")
    def progress(self, obj: IngestJob) -> str:
        pct = 100 if obj.status == "done" else int(100 * obj.files_done / obj.files_total) if obj.files_total else 0
        return format_html('<progress max="100" value="{}"></progress> {}%', pct, pct)

    @admin.display(description="rate / time left")
    def pace(self, obj: IngestJob) -> str:
        """Measured so far, computed on read (search.ingest.progress): this page never writes."""
        return describe_pace(ingest_job_pace(obj, now=timezone.now()), unit=pace_unit(obj)) or "-"

    @admin.display(description="error")
    def short_error(self, obj: IngestJob) -> str:
        return obj.error[:120]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        active = IngestJob.objects.filter(status__in=["pending", "running"]).exists()
        extra_context = {**(extra_context or {}), "encoders": encoders_line()}
        response = super().changelist_view(request, extra_context=extra_context)
        if active:
            response["Refresh"] = "3"
        return response


class RerankInline(admin.TabularInline):
    model = RerankResult
    extra = 0
    can_delete = False
    fields = ("final_rank", "chunk", "dense_score", "dense_rank", "sparse_score", "sparse_rank", "fused_score",
              "rank_before", "rerank_score", "rank_after", "graph_boost")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: QuerySession | None = None) -> bool:
        return False


@admin.register(QuerySession)
class QuerySessionAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "project", "user", "query", "result_count", "reranker", "total_ms")
    list_filter = ("kind", "reranker", "project")
    search_fields = ("query", "user__email", "project__slug", "search_session_id")
    list_select_related = ("project", "user")
    inlines = [RerankInline]

    @admin.display(description="total ms")
    def total_ms(self, obj: QuerySession) -> float | None:
        return (obj.timings or {}).get("total_ms")


@admin.register(RerankResult)
class RerankResultAdmin(ReadOnlyAdmin):
    list_display = ("session", "final_rank", "rank_before", "rank_after", "fused_score", "rerank_score",
                    "dataset_id", "project_id")
    search_fields = ("session__query", "session__search_session_id")
    list_filter = ("project_id",)


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "session", "chunk", "user", "relevance")
    list_filter = ("relevance",)
    search_fields = ("session__query", "user__email")


@admin.register(DailyMetric)
class DailyMetricAdmin(ReadOnlyAdmin):
    list_display = ("day", "project", "kind", "judged_sessions", "mrr_at_10", "ndcg_at_10", "updated_at")
    list_filter = ("kind", "project")
    search_fields = ("project__slug",)


@admin.register(GraphEdge)
class GraphEdgeAdmin(ReadOnlyAdmin):
    list_display = ("source_id", "relation", "target_id", "ruleset_id", "book_id")
    list_filter = ("relation", "ruleset_id", "book_id")
    search_fields = ("source_id", "target_id")


@admin.register(TraversalConfig)
class TraversalConfigAdmin(admin.ModelAdmin):
    """Edits save a new version (the old one stays, inactive) so a change can be audited and reverted."""

    list_display = ("ruleset_id", "version", "is_active", "updated_at")
    list_filter = ("ruleset_id", "is_active")
    search_fields = ("ruleset_id",)
    readonly_fields = ("version", "created_at", "updated_at")

    def save_model(self, request: HttpRequest, obj: TraversalConfig, form: forms.ModelForm, change: bool) -> None:
        names = {k: getattr(obj, f) for k, f in traversal.NAME_FIELDS.items()}
        try:
            with transaction.atomic():
                saved = traversal.save_config(ruleset_id=obj.ruleset_id, names=names,
                                              player_keywords=obj.player_keywords, gm_keywords=obj.gm_keywords,
                                              intent_patterns=obj.intent_patterns, policies=obj.policies)
        except Exception as exc:  # noqa: BLE001 - e.g. a bad regex: say so instead of a 500
            self.message_user(request, f"Not saved: {exc}", messages.ERROR)
            return
        obj.pk, obj.version = saved.pk, saved.version
        self.message_user(request, f"Saved as version {saved.version} of {saved.ruleset_id}.", messages.SUCCESS)


@admin.register(EvaluationRun)
class EvaluationRunAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "collection", "queries", "ndcg10", "report_dir")
    search_fields = ("collection",)
    readonly_fields = ("collection", "queries", "ndcg10", "chart", "timings", "report_dir", "created_at")

    @admin.display(description="nDCG@10 per pipeline")
    def ndcg10(self, obj: EvaluationRun) -> str:
        parts = []
        for pipe, metrics in (obj.results or {}).items():
            v = metrics.get("ndcg@10") if isinstance(metrics, dict) else None
            if isinstance(v, (int, float)):
                parts.append(f"{pipe} {v:.3f}")
        return ", ".join(parts)

    @admin.display(description="chart")
    def chart(self, obj: EvaluationRun) -> str:
        if not _chart_path(obj):
            return "no chart on this machine"
        return format_html('<img src="{}" alt="nDCG@10, MRR@10, recall@100 per pipeline" style="max-width:100%">',
                           reverse("admin:search_evaluationrun_chart", args=[obj.pk]))

    def get_urls(self) -> list[URLPattern | URLResolver]:
        chart = self.admin_site.admin_view(self.chart_view)
        return [path("<int:pk>/chart.png", chart, name="search_evaluationrun_chart"), *super().get_urls()]

    def chart_view(self, request: HttpRequest, pk: int) -> FileResponse:
        """The run's chart, from the report folder `evaluate` wrote it to (the path comes from the row and the
        collection's name, never from the request)."""
        obj = EvaluationRun.objects.filter(pk=pk).first()
        png = _chart_path(obj) if obj is not None and self.has_view_permission(request, obj) else None
        if png is None:
            raise Http404("no chart")
        return FileResponse(png.open("rb"), content_type="image/png")


def _chart_path(run: EvaluationRun) -> Path | None:
    png = Path(run.report_dir or "var/reports") / f"{report_slug(run.collection)}.png"
    return png if png.is_file() else None


class QualityJobForm(forms.Form):
    """What a quality job runs on: each kind reads the fields it names (search.quality.jobs checks them)."""

    kind = forms.ChoiceField(choices=QualityJob.Kind.choices)
    collection = forms.ChoiceField(required=False, help_text="evaluate a BEIR collection: a folder under "
                                                             "EVALUATION_DATA_DIR")
    queries = forms.ChoiceField(required=False, help_text="evaluate rules questions: the demo's or rules/<name>.json")
    project = forms.ModelChoiceField(queryset=Project.objects.order_by("slug"), required=False, to_field_name="slug",
                                     help_text="rules questions, reranker training, fusion choice, adaptation")
    name = forms.CharField(required=False, help_text="train a reranker or adapt the embedding model: the model's name")
    pseudo = forms.BooleanField(required=False, help_text="train on pseudo-queries only (no feedback)")
    activate = forms.BooleanField(required=False, initial=True,
                                  help_text="adopt the trained reranker if it beats fusion on the held-out slice; "
                                            "adopt the adapted embedding model if the adoption rule holds")
    max_queries = forms.IntegerField(required=False, min_value=0, help_text="evaluate at most this many (0: all)")
    judged_max = forms.IntegerField(required=False, min_value=0,
                                    help_text="adapt: at most this many judged queries check the model, the rest "
                                              "train (blank: half of them, at least 30, at most 300; 0: all train)")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["collection"].choices = [("", "—"), *((c, c) for c in quality_jobs.beir_collections())]
        self.fields["queries"].choices = [(q, q) for q in quality_jobs.rules_query_files()]

    def options(self) -> dict[str, Any]:
        d = self.cleaned_data
        project = d.get("project")
        return {"collection": d.get("collection") or None, "queries": d.get("queries") or "demo",
                "project": project.slug if project else None, "name": d.get("name") or None,
                "pseudo": d.get("pseudo", False), "activate": d.get("activate", False),
                "max_queries": d.get("max_queries") or 0, "judged_max": d.get("judged_max")}


@admin.register(QualityJob)
class QualityJobAdmin(ReadOnlyAdmin):
    """Evaluate, train or choose while the platform serves: "Queue a job" runs it in this process (the one that
    owns the embedded store); the list shows each job's stage and progress and reloads itself while one is active."""

    list_display = ("created_at", "kind", "state", "progress", "summary", "evaluation_link", "short_error")
    list_filter = ("status", "kind")
    readonly_fields = ("kind", "options", "status", "stage", "done", "total", "pace", "result", "error", "evaluation",
                       "created_by", "created_at", "started_at", "stage_started_at", "updated_at", "finished_at")
    change_list_template = "admin/search/qualityjob/change_list.html"

    @admin.display(description="status")
    def state(self, obj: QualityJob) -> str:
        """A running job whose lock no process holds was interrupted (its process stopped); the next job queued
        marks it failed. Only looks: takes no lock."""
        if obj.status == QualityJob.Status.RUNNING and not runner_alive(obj.pk):
            return "interrupted"
        return obj.status

    @admin.display(description="progress")
    def progress(self, obj: QualityJob) -> str:
        pace = describe_pace(quality_job_pace(obj, now=timezone.now()), unit="items")
        return format_html('<progress max="100" value="{}"></progress> {}% {} {} {}', obj.percent, obj.percent,
                           obj.stage, f"({obj.done}/{obj.total})" if obj.total else "", pace)

    @admin.display(description="rate / time left")
    def pace(self, obj: QualityJob) -> str:
        """The current stage's rate and time left, computed on read (search.quality.progress)."""
        return describe_pace(quality_job_pace(obj, now=timezone.now()), unit="items") or "-"

    @admin.display(description="result")
    def summary(self, obj: QualityJob) -> str:
        r = obj.result or {}
        if "best" in r:
            return (f"{r['collection']}: default nDCG@10 {r.get('default_ndcg@10')}, best {r['best']['pipeline']} "
                    f"{r['best']['ndcg@10']}")
        if "verdict" in r:
            return f"{r['model']}: {r['verdict']}"
        if "reason" in r:
            return f"{'adopted' if r['adopted'] else 'kept the default'}: {r['reason']}"
        return ""

    @admin.display(description="report")
    def evaluation_link(self, obj: QualityJob) -> str:
        if obj.evaluation_id is None:
            return ""
        return format_html('<a href="{}">report and chart</a>',
                           reverse("admin:search_evaluationrun_change", args=[obj.evaluation_id]))

    @admin.display(description="error")
    def short_error(self, obj: QualityJob) -> str:
        return obj.error[:160]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        active = any(job.status == QualityJob.Status.PENDING or runner_alive(job.pk)
                     for job in QualityJob.objects.filter(status__in=["pending", "running"]))
        extra_context = {**(extra_context or {}), "encoders": encoders_line()}
        response = super().changelist_view(request, extra_context=extra_context)
        if active:
            response["Refresh"] = "3"
        return response

    def get_urls(self) -> list[URLPattern | URLResolver]:
        queue = self.admin_site.admin_view(self.queue_view)
        return [path("queue/", queue, name="search_qualityjob_queue"), *super().get_urls()]

    def queue_view(self, request: HttpRequest) -> HttpResponse:
        """GET: the form; POST: check the options (a bad one is shown on its field, nothing stored) and start the
        job in a thread of this process."""
        if not request.user.has_perm("search.add_qualityjob"):
            return HttpResponseRedirect(reverse("admin:index"))
        form = QualityJobForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            try:
                job = quality_jobs.submit(kind=form.cleaned_data["kind"], options=form.options(), user=request.user)
            except ApiError as exc:
                field = exc.field if exc.field in form.fields else None
                form.add_error(field, exc.detail)
            else:
                self.message_user(request, f"Queued: {job.get_kind_display()} ({job.pk}).", messages.SUCCESS)
                return HttpResponseRedirect(reverse("admin:search_qualityjob_changelist"))
        context = {**self.admin_site.each_context(request), "title": "Queue a quality job", "form": form,
                   "data_dir": quality_jobs.data_dir(), "opts": self.model._meta}
        return TemplateResponse(request, "admin/search/qualityjob/queue.html", context)


@admin.register(ReconcileRun)
class ReconcileRunAdmin(ReadOnlyAdmin):
    """History of index checks; "Reconcile now" runs one here, in the process that owns the embedded store."""

    list_display = ("created_at", "verdict", "orphans", "missing", "stale", "unembedded", "pending", "fixed",
                    "orphans_after", "missing_after", "stale_after", "points", "chunks", "duration_s")
    list_filter = ("fixed",)
    search_fields = ("store", "model_id")
    change_list_template = "admin/search/reconcilerun/change_list.html"

    @admin.display(description="index", boolean=True)
    def verdict(self, obj: ReconcileRun) -> bool:
        return obj.exact

    def get_urls(self) -> list[URLPattern | URLResolver]:
        run = self.admin_site.admin_view(self.run_view)
        return [path("run/", run, name="search_reconcilerun_run"), *super().get_urls()]

    def run_view(self, request: HttpRequest) -> HttpResponse:
        """POST only. Synchronous: a check reads every point once (seconds at 100k); the message gives the counts."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_view_permission(request):
            return HttpResponseRedirect(reverse("admin:index"))
        fix = request.POST.get("fix") == "1"
        try:
            reports = reconcile_all(fix=fix)
        except DependencyDown as exc:
            self.message_user(request, f"Reconcile failed: {exc.detail}", messages.ERROR)
        else:
            for report in reports:  # the configured model's collections, then each adapted model's
                f, a = report.found, report.after
                text = (f"Found {len(f.orphans)} orphans, {len(f.missing)} missing, {len(f.stale)} stale "
                        f"({f.points} points, {f.chunks} chunks, {report.pending} outbox rows pending) in the "
                        f"collections of {report.model_id}.")
                if a is not None:
                    text += (f" After the fix: {len(a.orphans)} orphans, {len(a.missing)} missing, "
                             f"{len(a.stale)} stale.")
                self.message_user(request, text, messages.SUCCESS if report.exact else messages.WARNING)
        return HttpResponseRedirect(reverse("admin:search_reconcilerun_changelist"))


class SourceAdminForm(forms.ModelForm):
    """The token is write-only: a password box that never renders a value; blank keeps the stored one.

    The source is checked by the same service as the API and the pages (search.sources.spec), so the admin
    cannot store what they would refuse (an unsafe address, a bad ref), staff's local paths excepted."""

    token = forms.CharField(required=False, strip=False, widget=forms.PasswordInput(render_value=False),
                            help_text="Write-only: stored encrypted, never shown. Blank keeps the stored token.")
    clear_token = forms.BooleanField(required=False, help_text="Remove the stored token.")
    type = forms.ChoiceField(choices=lambda: [(name, name) for name in SOURCE_TYPES])

    class Meta:
        model = Source
        fields = ("dataset", "type", "config", "interval_s")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        dataset = data.get("dataset") or getattr(self.instance, "dataset", None)
        if dataset is None or not isinstance(data.get("config"), dict):
            if "config" in data and not isinstance(data.get("config"), dict):
                self.add_error("config", "The config is a JSON object, e.g. {\"url\": ..., \"ref\": \"main\"}.")
            return data
        try:
            data["spec"] = spec.parse_source({**data["config"], "type": data.get("type")}, user=self.user,
                                             dataset_kind=dataset.kind)
            data["interval"] = spec.parse_interval(data.get("interval_s"))
            data["secret"] = "" if data.get("clear_token") else spec.parse_token(data.get("token") or None)
        except ApiError as exc:
            field = exc.field or ""
            target = ("interval_s" if field == "interval_s" else "token" if field == "token"
                      else "type" if field == "source.type" else "config")
            self.add_error(target, f"{exc.detail} ({field})" if field else exc.detail)
        return data


class FailingFilter(admin.SimpleListFilter):
    """The sources whose last syncs failed (consecutive_failures > 0): what an operator looks at first."""

    title = "health"
    parameter_name = "health"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("failing", "failing"), ("ok", "ok")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Source]) -> QuerySet[Source]:
        if self.value() == "failing":
            return queryset.filter(consecutive_failures__gt=0)
        if self.value() == "ok":
            return queryset.filter(consecutive_failures=0)
        return queryset


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    """Dataset sources: set through the same checks as the API, synced now by an action, failing ones filtered.

    Saving goes through search.sources.sync.set_source (the row lock, forgetting the commit when the URL changes,
    the encrypted token, the schedule), not a plain model save."""

    form = SourceAdminForm
    list_display = ("dataset", "type", "url", "interval_s", "has_token", "last_sync_at", "last_success_at",
                    "next_sync_at", "consecutive_failures", "short_error")
    list_filter = (FailingFilter, "type")
    search_fields = ("dataset__name", "dataset__project__slug", "last_error", "config")
    list_select_related = ("dataset", "dataset__project")
    autocomplete_fields = ("dataset",)
    readonly_fields = ("state", "last_sync_at", "last_success_at", "next_sync_at", "consecutive_failures",
                       "last_error", "has_token", "recent_syncs")
    actions = ["sync_now"]
    ordering = ("-consecutive_failures", "dataset_id")

    def get_form(self, request: HttpRequest, obj: Source | None = None, change: bool = False,
                 **kwargs: Any) -> type[forms.ModelForm]:
        form = super().get_form(request, obj, change=change, **kwargs)
        form.user = request.user
        return form

    def get_readonly_fields(self, request: HttpRequest, obj: Source | None = None) -> Sequence[str]:
        return (*self.readonly_fields, "dataset") if obj is not None else self.readonly_fields

    @admin.display(description="url")
    def url(self, obj: Source) -> str:
        try:
            return display_url(obj.type, obj.config)
        except (KeyError, IndexError, TypeError):
            return "-"

    @admin.display(description="token", boolean=True)
    def has_token(self, obj: Source) -> bool:
        return obj.has_secret

    @admin.display(description="last error")
    def short_error(self, obj: Source) -> str:
        return obj.last_error[:120]

    @admin.display(description="syncs")
    def recent_syncs(self, obj: Source) -> str:
        if obj.pk is None:
            return "-"
        jobs = sync_history(dataset=obj.dataset, limit=20)
        if not jobs:
            return "none yet"
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                                ((f"{j.created_at:%Y-%m-%d %H:%M:%S}", j.options.get("trigger", ""), j.status,
                                  j.error[:300] or j.summary) for j in jobs))
        return format_html("<table><tr><th>started</th><th>trigger</th><th>status</th><th>result</th></tr>{}"
                           "</table>", rows)

    def save_model(self, request: HttpRequest, obj: Source, form: forms.ModelForm, change: bool) -> None:
        data = form.cleaned_data
        dataset = obj.dataset if change else data["dataset"]
        saved = set_source(user=request.user, dataset=dataset, spec=data["spec"], interval_s=data["interval"],
                           token=data["secret"])
        obj.pk = saved.pk
        obj.refresh_from_db()

    @admin.action(description="Sync now")
    def sync_now(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        for source in queryset.select_related("dataset"):
            try:
                start_sync(dataset=source.dataset, user=request.user, trigger="admin")
                self.message_user(request, f"{source.dataset}: sync queued (see Ingest jobs for progress).")
            except ApiError as exc:
                self.message_user(request, f"{source.dataset}: {exc.detail}", messages.WARNING)


# --------------------------------------------------------------------------- projects: ranking settings
class ProjectRankingForm(forms.ModelForm):
    """The reranker is picked from the models trained here, each labelled with its held-out evidence."""

    class Meta:
        model = ProjectRanking
        fields = ("reranker",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

        choices = [("", "none (RERANKER_MODEL, else the embedded reranker on request)")]
        for m in trained_rerankers():
            h = m.get("heldout") or {}
            choices.append((m["name"], f"{m['name']} — held-out nDCG@10 {h.get('reranked_ndcg@10')} vs fused "
                                       f"{h.get('fused_ndcg@10')}"))
        current = self.instance.reranker if self.instance and self.instance.pk else ""  # pk: the project
        if current and current not in {c[0] for c in choices}:
            choices.append((current, f"{current} (missing on this machine)"))
        self.fields["reranker"] = forms.ChoiceField(choices=choices, required=False,
                                                    help_text=ProjectRanking._meta.get_field("reranker").help_text)


class ProjectRankingInline(admin.StackedInline):
    """The ranking settings on the project's admin page (projects.admin.extend_project_admin): the reranker picked
    from the models trained here, and the fusion chosen from feedback with its evidence."""

    model = ProjectRanking
    form = ProjectRankingForm
    can_delete = False
    max_num = 1
    min_num = 0
    extra = 1
    verbose_name = verbose_name_plural = "ranking"
    fields = ("reranker", "fusion_choice")
    readonly_fields = ("fusion_choice",)

    @admin.display(description="fusion, from feedback")
    def fusion_choice(self, obj: ProjectRanking) -> str:
        return fusion_report(obj.fusion or {})


@admin.action(description="Choose fusion from feedback (adopted only on held-out evidence)")
def choose_fusion(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Project]) -> None:
    """Runs here, in the web process, because it owns the embedded index handle (a command in another
    process cannot open it while the server runs); a few seconds per hundred judged queries."""
    for project in queryset:
        try:
            result = choose_for_project(project=project)
        except DependencyDown as exc:
            modeladmin.message_user(request, f"{project.slug}: {exc.detail}", messages.WARNING)
            continue
        verdict = f"adopted {result.setting.label}" if result.adopted else f"kept the default ({result.evidence.get('baseline', 'rrf k=60')})"
        modeladmin.message_user(request, f"{project.slug}: {verdict}: {result.reason}",
                                messages.SUCCESS if result.adopted else messages.INFO)


def fusion_report(choice: dict[str, Any]) -> str:
    """What `manage.py choose_fusion` decided and on what evidence."""
    if not choice:
        return ("not evaluated yet: manage.py choose_fusion --project <slug> (needs judged queries; a Python code "
                "project without feedback: add --self-judged)")
    ev = choice.get("evidence", {})
    running = choice.get("label") if choice.get("setting") else f"the default, {ev.get('baseline', '')}"
    if ev.get("source") == "self-judged":  # label-free: its docstrings and commits (search.quality.self_judged)
        judged = ("judged queries", f"{ev.get('pairs', 0)} self-judged (docstring → function, no feedback; "
                                    f"at least {ev.get('min_queries', '?')})")
        history = None  # a choice stored before commit messages took part has no "git_sources"
        if ev.get("git_sources"):
            history = ("commit-message queries", f"{ev.get('history', 0)} (commit message → changed files, from "
                                                 f"{len(ev['git_sources'])} git sources' history)")
        elif "git_sources" in ev:
            history = ("commit-message queries", "none: no git source, so docstrings decide alone")
    else:
        judged = ("judged queries", f"{ev.get('judged_queries', 0)} (at least {ev.get('min_queries', '?')})")
        history = None
    rows = [("runs", running), ("why", choice.get("reason", "")), judged, *([history] if history else [])]
    if "legs" in ev:
        rows.append(("single legs, nDCG@10", f"dense {ev['legs']['dense']}, sparse {ev['legs']['sparse']}"))
    if "pick" in ev:
        rows.append((f"pick half ({ev['pick']['queries']} q), best", ev["pick"]["best"]))
    kinds = {name: t for name, t in (ev.get("types") or {}).items() if "legs" in t}
    for name, t in kinds.items() if len(ev.get("types") or {}) > 1 else ():  # every kind must confirm
        rows.append((f"{name}: single legs, nDCG@10", f"dense {t['legs']['dense']}, sparse {t['legs']['sparse']}"))
        if "confirm" not in t:
            continue
        c = t["confirm"]
        rows.append((f"{name} confirm half ({c['queries']} q)",
                     f"default {c['default']} → best {c['best']} (gain {c['gain']:+}, 95 % lower bound "
                     f"{c['gain_lower_95']:+}; {c['wins']} wins, {c['losses']} losses): "
                     f"{'passes' if t.get('passes') else 'fails'}"))
    if "confirm" in ev:
        c = ev["confirm"]
        rows.append((f"confirm half ({c['queries']} q)", f"default {c['default']} → best {c['best']} "
                     f"(gain {c['gain']:+}, 95 % lower bound {c['gain_lower_95']:+}; {c['wins']} wins, "
                     f"{c['losses']} losses)"))
    rows.append(("computed", ev.get("computed_at", "")))
    return format_html("<table>{}</table>", format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows))


# The project admin stays projects'; search adds its ranking inline and the fusion action, and a project's delete
# takes search's rows with it without asking for their (read-only) admins' delete permission.
extend_project_admin(inlines=[ProjectRankingInline], actions=[choose_fusion],
                     owned=list(apps.get_app_config("search").get_models()))
