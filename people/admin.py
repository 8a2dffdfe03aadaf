from django.contrib import admin

from people.models import (
    ExperienceCard,
    ExperienceCardChild,
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
    """Read-only: the terms are counted from the cards (people/vocabulary.py); add what the data cannot teach
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
