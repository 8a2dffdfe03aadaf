import io
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from people.importing.importer import import_file
from people.models import (
    ExperienceCard,
    ExperienceCardChild,
    ImportJob,
    Person,
    PersonProfile,
    Search,
    SearchResult,
    UnlockContact,
    VocabAlias,
    VocabTerm,
)


class ProfileInline(admin.StackedInline):
    model = PersonProfile
    extra = 0


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ("display_name", "headline", "created_at")
    search_fields = ("display_name", "email", "external_id")
    inlines = [ProfileInline]


class ChildInline(admin.TabularInline):
    model = ExperienceCardChild
    fk_name = "parent"
    extra = 0
    exclude = ("embedding",)


@admin.register(ExperienceCard)
class ExperienceCardAdmin(admin.ModelAdmin):
    list_display = ("title", "person", "company_norm", "city", "start_date", "end_date", "visibility")
    list_filter = ("visibility", "intent_primary", "city")
    search_fields = ("title", "company_norm", "person__display_name")
    exclude = ("embedding",)
    raw_id_fields = ("person",)
    inlines = [ChildInline]


class ResultInline(admin.TabularInline):
    model = SearchResult
    extra = 0
    raw_id_fields = ("person",)


@admin.register(Search)
class SearchAdmin(admin.ModelAdmin):
    list_display = ("query_text", "searcher", "created_at", "expires_at")
    inlines = [ResultInline]


@admin.register(UnlockContact)
class UnlockAdmin(admin.ModelAdmin):
    list_display = ("searcher", "target_person", "search", "created_at")


@admin.register(VocabTerm)
class VocabTermAdmin(admin.ModelAdmin):
    """Read-only: the terms are counted from the cards (people/parsing/vocabulary.py); add what the data cannot teach
    as an alias."""

    list_display = ("kind", "norm", "count", "extra", "updated_at")
    list_filter = ("kind",)
    search_fields = ("norm",)
    readonly_fields = ("kind", "norm", "count", "extra", "updated_at")

    def has_add_permission(self, request: object) -> bool:
        return False


@admin.register(VocabAlias)
class VocabAliasAdmin(admin.ModelAdmin):
    """Aliases the parser should know ("big blue" -> ibm); they apply to the next search in every process."""

    list_display = ("kind", "alias", "norm", "updated_at")
    list_filter = ("kind",)
    search_fields = ("alias", "norm")

    def save_model(self, request: object, obj: VocabAlias, form: object, change: bool) -> None:
        obj.alias = " ".join(obj.alias.lower().split())
        obj.norm = " ".join(obj.norm.lower().split())
        super().save_model(request, obj, form, change)


class ImportUploadForm(forms.ModelForm):
    upload = forms.FileField(help_text="JSONL (one person per line) or CSV (one card per row); see README, "
                                       "'Importing a directory'.")
    embed = forms.ChoiceField(choices=[("celery", "in Celery (progress below)"), ("inline", "now, in this request"),
                                       ("none", "not at all")], initial="celery")

    class Meta:
        model = ImportJob
        fields = ("file_format",)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        up = data.get("upload")
        if up is not None and up.name.lower().endswith(".csv"):
            data["file_format"] = "csv"
        return data


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    """Upload a directory file: good rows are written, rejected rows listed (line, field, reason), embeddings
    computed in Celery with their progress here."""

    list_display = ("source_name", "file_format", "created_at", "created", "updated", "unchanged", "rejected",
                    "embedding_progress")
    readonly_fields = ("source_name", "created_by", "created_at", "created", "updated", "unchanged", "cards",
                       "rejected", "embedding_progress", "rejected_rows")
    exclude = ("errors", "embed_total", "embed_done")

    @admin.display(description="embeddings")
    def embedding_progress(self, obj: ImportJob) -> str:
        if not obj.embed_total:
            return "nothing to embed"
        return f"{obj.embed_done} / {obj.embed_total} ({100 * obj.embed_done // obj.embed_total}%)"

    @admin.display(description="rejected rows (line: field: reason)")
    def rejected_rows(self, obj: ImportJob) -> str:
        return "\n".join(f"line {e['line']}: {e['field'] or 'record'}: {e['reason']}" for e in obj.errors) or "none"

    def get_form(self, request: HttpRequest, obj: ImportJob | None = None, **kwargs: Any) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"] = ImportUploadForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: ImportJob | None = None) -> tuple[str, ...]:
        return ("file_format", *self.readonly_fields) if obj is not None else ()

    def get_exclude(self, request: HttpRequest, obj: ImportJob | None = None) -> tuple[str, ...]:
        return self.exclude if obj is not None else (*self.exclude, *self.readonly_fields)

    def has_change_permission(self, request: HttpRequest, obj: ImportJob | None = None) -> bool:
        return False if obj is not None else super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: ImportJob, form: forms.ModelForm, change: bool) -> None:
        up = form.cleaned_data["upload"]
        text = io.TextIOWrapper(up.file, encoding="utf-8", newline="")
        obj.file_format, obj.source_name, obj.created_by = form.cleaned_data["file_format"], up.name, request.user
        import_file(lines=text, job=obj, embed=form.cleaned_data["embed"])  # saves obj: the redirect opens its report
